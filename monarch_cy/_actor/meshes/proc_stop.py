"""Stopping procs: ``ProcMesh.stop()`` of the mesh's owner, and :func:`stop_all` at
exit or ``shutdown_context()``.

A stop posts ``__stop__`` to each actor on the path its calls took (so they run
first; down an actor mesh's cast tree where calls may still be on their way,
:func:`~monarch_cy._actor.cast.router.stop_down_trees`), then ``STOP`` to each proc
(directly, or down the tree for large meshes, :mod:`monarch_cy._actor.cast.stop`),
which runs its actors' ``__cleanup__`` and exits; whatever is left after the grace
period is SIGKILLed.  The Future resolves when every proc has exited.

A stopped mesh leaves nothing behind in the controller (:func:`release`): a
second after every proc exited, the files its procs and actors bound in the run directory, its
procs' entries in the node's record of dead procs, its actors' homes and the mesh's
own state are dropped, so a long-lived controller that spawns and stops meshes
stays flat.
"""

from __future__ import annotations

import time

from monarch_cy._actor.base import client_faults, state as _state
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.cast import stop as stop_tree
from monarch_cy._actor.cast.router import stop_down_trees
from monarch_cy._actor.cast.tree import use_tree
from monarch_cy._actor.meshes.proc_state import addrs_on
from monarch_cy._actor.model.actor import post_to
from monarch_cy._transport.protocol import STOP, pack

__all__ = ["stop_procs", "stop_all", "release", "GRACE_S"]

GRACE_S = 3.0       # how long procs have to stop before they are SIGKILLed
RELEASE_AFTER_S = 1.0   # after the last exit, how long a stopped mesh is still known


def stop_procs(node, st) -> Future:
    """Stop every proc of the proc mesh ``st`` owned here; idempotent (the same
    Future).  Non-blocking."""
    if st.stop_future is not None:
        return st.stop_future
    st.stopped = True
    client_faults.note_recovered(st)
    fut = st.stop_future = Future._make(None)
    live = [p for p in st.procs if p.popen is not None and p.alive]
    st.stop_waiting = set(live)
    left = [live]          # what the grace period's kill looks at, until all exited

    def stopped(_):
        left.clear()
        # what the procs sent before they exited (a failure report of an actor of
        # theirs, SUPERVISE) may be handled after their exits: it still finds the
        # mesh stopped, not unknown
        node.add_timer(RELEASE_AFTER_S, lambda: release(node, st))
    fut._then(stopped)
    if not live:
        fut._set_result(None)
        return fut
    # Procs known dead (their exit not processed yet) are waited for, not sent to:
    # no tree goes through them (cast.stop).
    targets = [p for p in live if _state.proc_failure(node, p.key) is None]
    treed, idle, belows = stop_down_trees(node, st.meshes)
    stops = []
    for p in targets:
        # __stop__ to each actor on the path its calls took (they run first), or
        # none where no call is in flight (the proc posts it itself); then STOP to
        # the proc, which waits for its actors' cleanup.
        sent = []
        for rec in st.meshes:
            if p.rank in rec.where:
                a = rec.where[p.rank][0]
                if a not in treed and a not in idle:
                    post_to(node, a, "__stop__")
                if a not in idle:
                    sent.append(a)
        stops.append((p, tuple(sent)))
    if use_tree(node, len(targets)):         # a few messages, not one per proc
        belows.append(stop_tree.send(node, stops))
    else:
        for p, sent in stops:
            node.send(p.key, [pack((STOP, sent))])
    if belows:
        _route_around_deaths(node, st, stops, belows, treed)

    def kill_rest():
        for p in left[0] if left else ():
            if p.alive:
                try:
                    p.popen.kill()
                except OSError:
                    pass
    node.add_timer(GRACE_S, kill_rest)
    return fut


def _route_around_deaths(node, st, stops, belows, treed) -> None:
    """Until the stop ends, a proc of it that exits other than cleanly (its STOP
    exits with 0, after passing the stop on) may have been a forwarder that took the
    stop of the procs below it along: those are stopped directly
    (:func:`~monarch_cy._actor.cast.stop.resend`)."""
    by_key = {p.key: (sent, lambda p=p: p.alive and
                      _state.proc_failure(node, p.key) is None) for p, sent in stops}

    def repost(addrs):
        for a in addrs:
            if a in treed:           # went down an actor mesh's tree: perhaps lost
                post_to(node, a, "__stop__")

    def exited(proc, code):
        if code != 0:
            stop_tree.resend(node, belows, proc.key, by_key, repost)
    st.stop_exit = exited


def release(node, st) -> None:
    """The proc mesh ``st`` was stopped and every proc of it exited: drop what the
    controller kept of it (module docstring).  Runs once, where the stop's Future
    resolved; a proc of it that did not exit (not started here) keeps its files."""
    keys, addrs, homes = [], [], []
    for p in st.procs:
        keys.append(p.key)
        mine = addrs_on(st, p.rank, p)
        homes += mine
        if p.popen is not None and not p.alive and not p.remote:
            addrs += (p.key, *mine)
        if _state.LIVE_PROCS.get(p.key) is p:
            del _state.LIVE_PROCS[p.key]
    _state.forget_dead(node, keys)
    for a in homes:
        _state.ACTOR_HOME.pop(a, None)
    client_faults.forget_seen((*keys, *homes))
    try:
        _state.STATES.remove(st)
    except ValueError:
        pass
    st.meshes = []                 # the actors' classes and arguments
    st.stop_exit = None
    node.remove_addresses(addrs)


def stop_all(grace: float = 2.0) -> None:
    """Stop every proc mesh still running and reap every child (used at exit)."""
    import subprocess  # deferred: import time (only the exit path waits on procs)
    node = _state.get_node()
    live = [p for p in list(_state.LIVE_PROCS.values()) if p.popen is not None]
    for st in _state.STATES:
        st.stopped = True
    hdr = pack((STOP,))
    for p in live:
        try:
            node.send(p.key, [hdr])
        except Exception:
            pass
    deadline = time.monotonic() + grace
    for p in live:
        left = max(0.0, deadline - time.monotonic())
        try:
            p.popen.wait(left)
        except subprocess.TimeoutExpired:
            p.popen.kill()
            try:
                p.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass
    # deferred: import time (the launcher loads when procs are first started)
    from monarch_cy._actor.launch.launcher import shutdown_zygote
    shutdown_zygote()
