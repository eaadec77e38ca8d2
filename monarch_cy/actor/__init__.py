"""monarch_cy.actor: single-controller actors, meshes and futures (Monarch's API shape).

Re-exports only; the implementation lives in :mod:`monarch_cy._actor`.  Importing
this module is cheap: it imports neither zmq, asyncio nor torch, and the multi-host
layer (``attach_to_workers``) and ``ChannelTransport`` are imported on first use, so that a program's first
``spawn_procs`` starts its procs sooner.
"""

from monarch_cy._errors import ActorError, MeshIndexError, MeshStoppedError, SupervisionError
from monarch_cy._actor.base import actor_config as config
from monarch_cy._actor.base.client_faults import (fault_hook_skips_seen,
                                                  unhandled_fault_hook)
from monarch_cy._actor.base.failure import MeshFailure
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.base.returns_future import returns_future
from monarch_cy._actor.base.shape import Extent, Point
from monarch_cy._actor.base.transports import enable_transport
from monarch_cy._actor.base.value_mesh import ValueMesh
from monarch_cy._actor.launch.bootstrap_command import BootstrapCommand, default_bootstrap_cmd
from monarch_cy._actor.meshes.controllers import get_or_spawn_controller
from monarch_cy._actor.meshes.host_mesh import HostMesh, this_host
from monarch_cy._actor.meshes.lifecycle import shutdown_context
from monarch_cy._actor.meshes.proc_mesh import ProcMesh, this_proc
from monarch_cy._actor.meshes.restart_policy import RestartPolicy
from monarch_cy._actor.model.actor import (Actor, ActorMesh, Context, context,
                                           current_actor_name, current_rank, current_size)
from monarch_cy._actor.model.concurrent import concurrent_endpoint
from monarch_cy._actor.model.endpoint import (Accumulator, Endpoint, as_endpoint, endpoint,
                                              send)
from monarch_cy._actor.model.ports import Channel, Port, PortReceiver
from monarch_cy._telemetry.api import get_meter, span, traced


from monarch_cy._debug.controller import debug_controller

__all__ = [
    "Accumulator",
    "Actor",
    "ActorError",
    "BootstrapCommand",
    "ActorMesh",
    "Channel",
    "ChannelTransport",
    "Context",
    "Endpoint",
    "Extent",
    "Future",
    "HostMesh",
    "MeshFailure",
    "MeshIndexError",
    "MeshStoppedError",
    "Point",
    "Port",
    "PortReceiver",
    "ProcMesh",
    "RestartPolicy",
    "SupervisionError",
    "ValueMesh",
    "as_endpoint",
    "attach",
    "attach_to_workers",
    "concurrent_endpoint",
    "config",
    "context",
    "current_actor_name",
    "current_rank",
    "current_size",
    "debug_controller",
    "default_bootstrap_cmd",
    "enable_transport",
    "endpoint",
    "get_meter",
    "get_or_spawn_controller",
    "returns_future",
    "run_worker_loop_forever",
    "run_worker_loop_until_shutdown",
    "send",
    "shutdown_context",
    "span",
    "start_worker_loop_forever",
    "this_host",
    "this_proc",
    "traced",
    "unhandled_fault_hook",
    "fault_hook_skips_seen",
]


_WORKER_LOOPS = ("run_worker_loop_forever", "run_worker_loop_until_shutdown",
                 "start_worker_loop_forever")


def __getattr__(name: str):
    if name == "ChannelTransport":             # the configuration API, on first use
        from monarch_cy._config_api import ChannelTransport
        globals()[name] = ChannelTransport
        return ChannelTransport
    if name in ("attach_to_workers", "attach"):   # the multi-host layer, on first use
        from monarch_cy._hosts import attach as _attach
        globals()[name] = fn = getattr(_attach, name)
        return fn
    if name in _WORKER_LOOPS:                  # worker loops, on first use
        from monarch_cy._hosts import worker_loop
        globals()[name] = fn = getattr(worker_loop, name)
        return fn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
