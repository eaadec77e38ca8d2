"""``get_or_spawn_controller``: one named singleton actor per job, as in Monarch.

The first call for a name, from the client or from any actor of the job, spawns
``Class(*args, **kwargs)`` in the controller process (the client's own proc, like
``this_proc().spawn``); every later call for that name, from anywhere in the job,
gets the same actor mesh.  A registry actor, the *controller controller*, lives in
the client and serialises the decisions; it is spawned on first need at an address
that every proc learns at start-up, so no lookup round trip is needed:

* in the client: the registry is spawned at once, then called;
* in a worker: one ``CC_ENSURE`` message asks the client to spawn the registry
  (idempotent), and the call goes straight to the registry's address (a unix
  outlet retries until the registry's socket is bound).

The registry owns the controllers it spawns: a controller that fails is recorded,
and later calls for its name raise ``ValueError("Failure on <name>: ...")``, as in
Monarch.  Nothing else of the job is failed by it.
"""

from __future__ import annotations

import threading

from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.addresses import alloc_addr, listen_port
from monarch_cy._actor.base.shape import Shape
from monarch_cy._actor.meshes.proc_mesh import this_proc
from monarch_cy._actor.model.actor import Actor, ActorMesh, endpoint_table
from monarch_cy._actor.model.endpoint import endpoint
from monarch_cy._transport.protocol import CC_ENSURE, pack


__all__ = ["get_or_spawn_controller", "cc_address", "handle_ensure", "CC_ENSURE"]

_NAME = "controller_controller"
_lock = threading.Lock()
_addr = None           # the registry's address (client: chosen here; worker: from cfg)
_mesh = None           # the registry's ActorMesh in the client, once spawned


class _ControllerController(Actor):
    """The registry of named controllers (one per job, in the client)."""

    def __init__(self) -> None:
        self._controllers = {}      # name -> ActorMesh, or the MeshFailure that ended it
        self._names = {}            # actor mesh name -> controller name

    @endpoint
    def get_or_spawn(self, name: str, cls, args: tuple, kwargs: dict):
        ent = self._controllers.get(name)
        if ent is None:
            ent = this_proc().spawn(name, cls, *args, **kwargs)
            self._controllers[name] = ent
            self._names[name] = name
        if not isinstance(ent, ActorMesh):
            raise ValueError(f"Failure on {name}: {ent}")
        return ent

    def __supervise__(self, failure) -> bool:
        # mesh_name is "<name>-<id>" (Monarch's form): the name as spawned before it
        name = self._names.get(failure.mesh_name.rsplit("-", 1)[0])
        if name is None:
            return False
        if isinstance(self._controllers.get(name), ActorMesh):
            self._controllers[name] = failure     # the first failure is the one kept
        return True


def cc_address(node) -> str:
    """The registry's address (chosen once per job, in the client)."""
    global _addr
    with _lock:
        if _addr is None:
            if node.addr.startswith("tcp://"):
                host = node.addr[len("tcp://"):].rsplit(":", 1)[0]
                _addr = f"tcp://{host}:{listen_port(host)}"   # MONARCH_CY_CONTROLLER_PORTS
            else:
                _addr = alloc_addr(node, "controllers")
        return _addr


def set_address(addr: str | None) -> None:
    """In a worker: the registry's address, from the proc's config."""
    global _addr
    _addr = addr


def _ensure(node) -> ActorMesh:
    """Spawn the registry in the client if it is not there yet; return its mesh."""
    global _mesh
    with _lock:
        if _mesh is not None:
            return _mesh
    addr = cc_address(node)
    with _lock:
        if _mesh is None:
            _mesh = this_proc()._spawn(_NAME, _ControllerController, (), {}, addrs=[addr])
        return _mesh


def handle_ensure(node, hdr, data, extras) -> None:
    """CC_ENSURE from a worker (runs in the client's pump)."""
    _ensure(node)


def get_or_spawn_controller(name: str, Class, *args, **kwargs):
    """The singleton actor named ``name``, spawned on first use; ``Future`` of its
    ActorMesh (a mesh of one actor, called with ``call_one`` and friends).

    Blocking: never (the returned Future resolves when the registry answered; the
    controller's ``__init__`` runs before any call on it, as for any spawn).
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, not {name!r}")
    if not (isinstance(Class, type) and issubclass(Class, Actor)):
        raise TypeError(f"get_or_spawn_controller needs a subclass of Actor, not {Class!r}")
    node = _state.get_node()
    if node.is_controller:
        mesh = _ensure(node)
    else:
        if _addr is None:
            raise RuntimeError("this process was not started by a monarch_cy controller "
                               "that knows the controller registry's address")
        node.send(node.controller_addr, [pack((CC_ENSURE,))])
        eps, plain = endpoint_table(_ControllerController)
        mesh = ActorMesh(_NAME, _ControllerController.__qualname__, eps, plain, [_addr],
                         [node.controller_addr], Shape.dense((), ()))
    return mesh.get_or_spawn.call_one(name, Class, args, kwargs)
