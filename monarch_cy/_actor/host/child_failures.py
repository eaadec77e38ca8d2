"""Failures of child actors, reaching their owner actors in this process.

An actor that spawns an actor mesh owns it, wherever its procs are: procs the
client started and handed to the actor (a remote view of a proc mesh), or procs the
actor asked for (``this_host().spawn_procs()`` inside it).  Its ``__supervise__``
hears of each of its children that fails, one event per failed rank, as Monarch's:

* :func:`handle_supervise_actor` — ``SUPERVISE_ACTOR``, in the pump: a child that
  failed (in any process of the job) reported its failure to its owner's process;
  it is queued for the owner at once (:meth:`ActorFailure.supervision_event`) and
  the child is answered, so that the call that failed the child is answered only
  after the owner had it.
* :func:`on_proc_failed` — a proc died: the children on it cannot report it, and the
  client does not know meshes that actors spawned, so the owner's process turns the
  death into the children's failures.  Every process of the job hears of a dead
  proc (the controller's ``PROC_DEAD``, or the controller's own pump); each owning
  actor here gets one :class:`MeshFailure` per child actor that ran on that proc
  (named as that actor, its rank in its mesh, the proc's exit as the cause).

A proc stopped on purpose (its proc mesh stopped) is no failure; an owner that has
failed or stopped drops what it gets (its own failure already went up), as Monarch's.  An actor whose
owner died with its process is orphaned: it stops, and calls on it fail with
Monarch's "timed out reaching controller" failure.
"""

from __future__ import annotations

import pickle

from monarch_cy._log import logger
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.failure import (PROC_STOPPED, MeshFailure, actor_who,
                                            failure_mesh_name, owner_lost)
from monarch_cy._actor.base.shape import Point

__all__ = ["on_proc_failed", "install", "handle_supervise_actor"]

_log = logger("actor")


def install(node) -> None:
    """Watch ``node``'s proc deaths (once per node)."""
    if on_proc_failed not in node.on_proc_failed:
        node.on_proc_failed.append(on_proc_failed)


def on_proc_failed(proc_key: str, cause: str) -> None:
    """In the pump: the proc ``proc_key`` is dead (``cause``); each actor of this
    process that owns actors on it gets their failures, and each actor whose owner
    ran there is orphaned (:func:`_orphan`)."""
    if cause == PROC_STOPPED:
        return
    for host in list(_state.HOSTS.values()):
        owner = host.owner
        if owner and owner[0] == "actor" and len(owner) > 5 and owner[5] == proc_key:
            _orphan(host, owner, cause)
        if host.failed is not None:
            continue
        for mesh in list(host.children):
            for failure in _failures_on(host, mesh, proc_key, cause):
                _deliver(host, failure)


def handle_supervise_actor(node, hdr, data, extras) -> None:
    """``(SUPERVISE_ACTOR, actor addr, reply addr, port id, reply key)`` + a pickled
    MeshFailure: queue it for that actor (if it still runs here), then answer."""
    _, addr, raddr, port, rkey = hdr[:5]
    try:
        failure = pickle.loads(data)
        host = _state.HOSTS.get(addr)
        if host is not None:
            _deliver(host, failure)
        else:
            _log.warning("a child's failure came for actor %s, which is not here (it "
                         "stopped): dropped:\n%s", addr, failure.report())
    finally:
        if port:
            node.reply(raddr, port, None, True, None, rkey)


def _orphan(host, owner, cause: str) -> None:
    """``host``'s owner died with its process: the actor stops (``__cleanup__``
    runs) and every call on it fails with Monarch's "timed out reaching controller"
    failure (Monarch's owner holds the mesh's controller; it gives up on it after a
    timeout, monarch_cy is told of the death at once)."""
    who = owner[4] if len(owner) > 4 and owner[4] else owner[1]
    text = owner_lost(who, failure_mesh_name(host.name, owner), cause)
    try:
        host.post("__orphan__", (text, who))
    except Exception as e:  # noqa: BLE001 - never stop the pump
        _log.error("actor %s: cannot stop it after its owner died: %s",
                   host.inst.actor_id, e)


def _deliver(host, failure) -> None:
    try:
        host.supervision_event(failure)
    except Exception as e:  # noqa: BLE001 - never stop the pump
        _log.error("actor %s: cannot deliver a child's failure (%s):\n%s",
                   host.inst.actor_id, e, failure.report())


def _failures_on(host, mesh, proc_key: str, cause: str) -> list:
    """The failures of ``mesh``'s actors that ran on ``proc_key`` (a child mesh of
    ``host``; its ranks are those of the mesh as spawned)."""
    out = []
    base = getattr(mesh, "_who_base", None)
    name = getattr(mesh, "_failure_name", mesh._name)
    for rank, key in enumerate(mesh._procs):
        if key != proc_key:
            continue
        who = actor_who(base[0], mesh._name, Point(rank, base[1]), host.who) \
            if base is not None else f"{mesh._name}[{rank}]"
        out.append(MeshFailure(name, (rank,), cause, "proc",
                               addrs=(mesh._addrs[rank],), who=who))
    return out
