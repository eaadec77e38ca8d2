"""The wiring: THE table of message handlers, and the nodes that use it.

Every message kind a node of the actor model handles beyond the transport's own
(``REPLY``, ``RELEASE``, ``PROC_DEAD``) has one line below, in the controller's table,
the worker's, or both.  A new kind gets its handler here and nowhere else.

* :func:`make_controller_node` — the controller's node (made on first use of the
  runtime, :func:`monarch_cy._actor.base.state.get_node`): the job secret, a private
  run directory and its job file (:mod:`.launch.job_file`), the log sink, the
  controller's handlers; torn down at interpreter
  exit (failures nobody handled yet reach the fault hook, every proc mesh still
  running is stopped, every child reaped, the run directory removed).
* :func:`install_worker` — a worker's handlers, log forwarding, watch of the
  controller and ``breakpoint()`` hook (:mod:`monarch_cy._debug.hook`; from
  :mod:`.bootstrap`).
* :data:`WORKER_MODULES` — what the fork server imports once before it forks
  workers: every module that holds a worker handler, plus what workers need before
  they serve.

This module sits above every floor of the actor model and imports them all; only
the package itself (at the controller's first use of the runtime) and the worker
bootstrap import it.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil

from monarch_cy._errors import ActorError
from monarch_cy._telemetry import runtime as telemetry_runtime
from monarch_cy._debug import hook as debug_hook
from monarch_cy._actor.base import client_faults, state as _state
from monarch_cy._actor.base.addresses import listen_port, transport
from monarch_cy._actor.cast import heartbeat as heartbeat_tree, spawn as spawn_tree, \
    stop as stop_tree, tree as cast_tree
from monarch_cy._actor.host import child_failures, log_prefix, logs
from monarch_cy._actor.host.log_sink import LogSink
from monarch_cy._actor.host.actor_host import handle_spawn
from monarch_cy._actor.host.stopping import stop_proc
from monarch_cy._actor.launch import job_file, proc_output
from monarch_cy._actor.launch.rundir import make_rundir
from monarch_cy._actor.meshes import controllers, failures, heartbeat, host_refs
from monarch_cy._actor.meshes.mesh_ctl import handle_mesh_ctl
from monarch_cy._actor.meshes.proc_stop import stop_all
from monarch_cy._transport.auth import JobKeys
from monarch_cy._transport.node import Node
from monarch_cy._transport.protocol import (CAST, CC_ENSURE, HB_TREE, HEARTBEAT,
                                            HEARTBEAT_ACK, MESH_CTL, REVIVE, SEEN,
                                            SPAWN, SPAWN_TREE, STOP, STOP_TREE, SUPERVISE,
                                            SUPERVISE_ACTOR, UNDELIVERABLE)

__all__ = ["CONTROLLER_HANDLERS", "WORKER_HANDLERS", "WORKER_MODULES",
           "make_controller_node", "install_worker"]


def _revive(node, hdr, data, extras) -> None:
    node.revive(hdr[1])               # that proc was respawned: calls reach it again


def _ignore(node, hdr, data, extras) -> None:
    pass


# kind -> handler(node, header, payload, extra frames); run in the node's pump.
CONTROLLER_HANDLERS = {
    SPAWN: handle_spawn,                        # actors of this_proc()
    SUPERVISE: failures.handle_supervise,       # an actor the client owns failed
    SUPERVISE_ACTOR: child_failures.handle_supervise_actor,  # a this_proc actor's child
    SEEN: failures.handle_seen,                 # a caller saw an actor's failure
    UNDELIVERABLE: failures.handle_undeliverable,  # a call reached a failed actor
    HEARTBEAT_ACK: heartbeat.handle_ack,
    MESH_CTL: handle_mesh_ctl,                  # remote views and workers ask
    CC_ENSURE: controllers.handle_ensure,       # get_or_spawn_controller's registry
}

WORKER_HANDLERS = {
    SPAWN: handle_spawn,
    CAST: cast_tree.forward,                    # calls down the cast tree
    HB_TREE: heartbeat_tree.forward,
    SPAWN_TREE: functools.partial(spawn_tree.forward, handle_spawn=handle_spawn),
    STOP_TREE: functools.partial(stop_tree.forward, stop=stop_proc),
    STOP: stop_proc,
    HEARTBEAT: heartbeat.handle_heartbeat,
    REVIVE: _revive,
    SEEN: _ignore,                              # only the controller keeps sightings
    UNDELIVERABLE: cast_tree.pass_undeliverable,  # up the cast tree to the caller
    MESH_CTL: handle_mesh_ctl,                  # a worker owns the meshes it started
    SUPERVISE_ACTOR: child_failures.handle_supervise_actor,  # a child of an actor here
}


def _module_of(fn) -> str:
    return (fn.func if isinstance(fn, functools.partial) else fn).__module__


# Imported by the fork server before any fork, so that no worker spends its start
# importing (4 workers importing at once on 2 cores took about 20 ms of a cold start).
WORKER_MODULES = tuple(sorted({_module_of(fn) for fn in WORKER_HANDLERS.values()} | {
    __name__, "monarch_cy.actor", "monarch_cy._actor.base.client_faults",
    "monarch_cy._actor.host.proc_setup", "monarch_cy._actor.launch.proc_bind",
    "monarch_cy._actor.cast.reduce", "monarch_cy._transport.auth",
    "monarch_cy._transport.node", "monarch_cy._transport.protocol",
    "monarch_cy._transport.shm", "monarch_cy._transport.wire",
    "monarch_cy._transport.alarm"}))


def make_controller_node(host: str | None = None, secret: bytes | None = None) -> Node:
    """The controller's node; ``host``: bind TCP on that address (reachable from other
    machines, see monarch_cy._hosts), on two ports from ``listen_port``; ``secret``:
    the job secret (default: random)."""
    if host is not None:        # before anything is made: a full port range raises
        addr, daddr = (f"tcp://{host}:{listen_port(host)}" for _ in range(2))
    rundir = make_rundir()
    keys = JobKeys(secret)
    if host is None and transport() == "tcp":
        addr, daddr = (f"tcp://127.0.0.1:{listen_port('127.0.0.1')}" for _ in range(2))
    elif host is None:
        scheme = "ipc" if transport() == "ipc" else "unix"
        addr, daddr = f"{scheme}://{rundir}/c", f"{scheme}://{rundir}/cd"
    node = Node(addr, keys, rundir=rundir, is_controller=True, direct_addr=daddr,
                remote_error=ActorError)
    _state.set_log_sink(LogSink(node))
    proc_output.flush_after_cells()          # in Jupyter: output shows in its cell
    node.handlers.update(CONTROLLER_HANDLERS)
    child_failures.install(node)     # proc deaths -> the owning actors of this process
    log_prefix.install()             # client threads that used context(): [actor=<root>]
    node.start_io_thread()
    job_file.write(rundir, addr, keys.secret)    # monarch-cy stacks finds the job by it
    atexit.register(_shutdown, node)
    _telemetry_at_start()
    return node


def _shutdown(node) -> None:
    try:
        if _state.LIVE_PROCS or client_faults.has_pending():
            client_faults.flush_at_exit()     # failures nobody handled yet: hook now
        stop_all(grace=2.0)
    finally:
        try:
            node.close()
        finally:
            proc_output.keep_logs_if_failed(node.rundir)
            shutil.rmtree(node.rundir, ignore_errors=True)


def install_worker(node, cfg: dict) -> None:
    """A worker's node is ready: its handlers, its fan-out inbox (the nogil
    forwarder of casts down the tree), the named-controller registry's address, its
    output forwarded to the controller, its exit when the controller's process
    ends, and ``breakpoint()`` reaching the controller's debugger."""
    node.controller_addr = cfg["controller"]
    node.handlers.update(WORKER_HANDLERS)
    child_failures.install(node)     # proc deaths -> the owning actors of this proc
    node.open_fanout()       # casts pass through this proc without its GIL (cast/tree.py)
    controllers.set_address(cfg.get("cc_addr"))
    host_refs.set_worker_host(cfg.get("host_mesh"))   # what this_host() names here
    logs.install_forwarding(node, cfg)
    node.watch_pid(cfg["controller_pid"], lambda pid: os._exit(1))
    debug_hook.install()            # breakpoint() pauses under the remote debugger
    _telemetry_at_start()


def _telemetry_at_start() -> None:
    """The process's runtime starts: telemetry on if ``MONARCH_CY_TELEMETRY=1`` (the
    one check; off, nothing below is imported)."""
    tel = telemetry_runtime.start_if_wanted()
    if tel is not None:
        from monarch_cy._actor.model import traced_calls  # deferred: import time (only with telemetry on)
        traced_calls.install(tel)
