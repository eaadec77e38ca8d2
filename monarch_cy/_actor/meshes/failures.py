"""Failures, in the controller: what it does when a proc exits or goes silent, and
when an actor owned by the client reports its failure (``SUPERVISE``).

Everything here runs in the controller's pump, once per proc incarnation: the proc's
pending calls end (:meth:`Node.proc_failed`), the other procs hear of it (PROC_DEAD),
and the failure goes to the restart policy (:mod:`.respawn`), to the actor that asked
for the procs, or to the client (:mod:`monarch_cy._actor.base.client_faults`).  A proc
that a respawn replaced, or one stopped on purpose, is not a failure.
"""

from __future__ import annotations

import pickle

from monarch_cy._actor.base import client_faults, state as _state
from monarch_cy._actor.base.failure import (PROC_STOPPED, MeshFailure, actor_who,
                                            failure_mesh_name, undeliverable, with_tail)
from monarch_cy._actor.base.shape import Extent, Point
from monarch_cy._actor.launch.proc_output import note_failure, tail_of
from monarch_cy._actor.meshes import respawn
from monarch_cy._actor.meshes.proc_state import addrs_on, broadcast_dead
from monarch_cy._transport.protocol import SUPERVISE_ACTOR, pack

__all__ = ["on_exit", "on_silent", "handle_supervise", "handle_seen",
           "handle_undeliverable", "maybe_restart", "describe_exit"]


def describe_exit(code: int) -> str:
    """A proc's exit status (``-N``: killed by signal N) in Monarch's words."""
    if code < 0:
        return f"the process this actor was running on failed: Killed(sig={-code})"
    return f"the process this actor was running on exited with non-zero code {code}"


def _proc_down(node, proc, cause: str) -> None:
    """A proc failed (died, or went silent): runs in the pump, once per incarnation.
    Ends its pending calls, tells the other procs, and reports the failure to the
    client, or lets the restart policy respawn it.  ``cause`` gets the proc's last
    lines of output (``MONARCH_CY_TAIL_LOG_LINES``, :func:`.failure.with_tail`)."""
    if proc.reported:
        return
    proc.reported = True
    st = proc.state
    cause = with_tail(cause, tail_of(proc.popen))
    if not st.stopped:
        note_failure(proc.popen)
    addrs = addrs_on(st, proc.rank, proc)
    ended = node.proc_failed(proc.key, cause, addrs)
    broadcast_dead(node, proc, cause, addrs)
    if st.stopped:
        return
    st.failed_ranks.add(proc.rank)
    on_it = [rec for rec in st.meshes if proc.rank in rec.where]
    failure = MeshFailure(
        st.name, (proc.rank,), cause, "proc",
        f"actor meshes on it: {', '.join(r.name for r in on_it) or 'none'}",
        addrs=(proc.key,))
    handled = maybe_restart(node, st, failure)
    if st.supervisor is not None and not handled:
        actor, where = st.supervisor                  # the asking actor's
        node.send(where, [pack((SUPERVISE_ACTOR, actor, "", 0, None),
                               pickle.dumps(failure))])
        return
    # The client hears of it as Monarch's does: once per actor mesh of its own on
    # the proc, named as that mesh's actor (once for the proc mesh when it holds
    # none).  Meshes an actor spawned reach that actor (host/child_failures.py).
    mine = [rec for rec in on_it if not rec.owner or rec.owner[0] == "client"]
    for f in [_mesh_failure(rec, proc, cause) for rec in mine] or [failure]:
        client_faults.client_failure(node, f, (proc.key,) + f.addrs, st, handled,
                                     ended > 0)


def _mesh_failure(rec, proc, cause: str) -> MeshFailure:
    """The failure of actor mesh ``rec``'s actor on ``proc`` (which died)."""
    addr, rank = rec.where[proc.rank]
    who = actor_who(f"{rec.cls.__module__}.{rec.cls.__qualname__}", rec.name,
                    Point(rank, Extent(rec.labels, rec.sizes)))
    return MeshFailure(failure_mesh_name(rec.name, rec.owner), (rank,), cause, "proc",
                       addrs=(addr,), who=who)


def maybe_restart(node, st, failure) -> bool:
    """Start a policy respawn of ``st``'s failed ranks; True if the policy took it."""
    pol = st.policy
    if pol is None or st.stopped or st.restarts >= pol.max_restarts:
        return False
    st.restarts += 1
    respawn.start(node, st, None, pol.delay(st.restarts), on_exit, policy=True)
    return True


def on_exit(node, proc, code: int) -> None:
    """Runs in the pump when a proc exits (reported by the launcher)."""
    try:
        if _state.LIVE_PROCS.get(proc.key) is proc:
            del _state.LIVE_PROCS[proc.key]
        st = proc.state
        if proc.replaced:
            pass                      # a respawn killed it and owns what follows
        elif st.stopped:
            cause = PROC_STOPPED
            addrs = addrs_on(st, proc.rank, proc)
            node.proc_failed(proc.key, cause, addrs)
            broadcast_dead(node, proc, cause, addrs)
            if st.stop_exit is not None:      # the stop routes around a dead forwarder
                st.stop_exit(proc, code)
        else:
            _proc_down(node, proc, describe_exit(code))
        proc.alive = False
        st.stop_waiting.discard(proc)
        if st.stop_future is not None and not st.stop_waiting:
            st.stop_future._set_result(None)
    finally:
        proc.done.set()


def on_silent(node, proc, cause: str) -> None:
    """Heartbeat timeout (in the pump): fail the proc now, then kill it."""
    _proc_down(node, proc, cause)
    try:
        proc.popen.kill()
    except OSError:
        pass


def handle_supervise(node, hdr, data, extras) -> None:
    """SUPERVISE in the controller: an actor owned by the client failed."""
    failure = pickle.loads(data)
    st, handled = None, False
    for a in failure.addrs:
        home = _state.ACTOR_HOME.get(a)
        if home is not None:
            st = home[0]
            st.failed_ranks.add(home[1])
    if st is not None:
        handled = maybe_restart(node, st, failure)
    client_faults.client_failure(node, failure, failure.addrs, st, handled)


def handle_seen(node, hdr, data, extras) -> None:
    """SEEN in the controller: a caller observed that actor's failure."""
    client_faults.note_seen(hdr[1])


def handle_undeliverable(node, hdr, data, extras) -> None:
    """UNDELIVERABLE in the controller: a call of the client reached an actor that had
    already failed or stopped; its error reply follows.  Monarch's hook hears of it,
    naming the call by its adverb (the collector's: ``call_one``, ``call``...; port
    0: a ``broadcast``, named by its destination).  A broadcast forwarded down a cast
    tree by the procs' I/O threads is bounced to its forwarder, which cannot tell
    whose it was: no hook (the nogil forwarders leave the caller's address)."""
    _, port_id, endpoint, dest, why, data_len = hdr[:6]
    col = node.port(port_id) if port_id else None
    if port_id and col is None:      # timed out, or not a port of the client's
        return
    client_faults.client_undeliverable(undeliverable(
        endpoint, getattr(col, "adverb", None), f"client@{node.addr}", dest, why, data_len))
