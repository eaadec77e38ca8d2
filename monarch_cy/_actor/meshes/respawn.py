"""Recovery in place: ``ProcMesh.respawn(ranks)`` and restart policies.

The unit of recovery is a *rank* (one proc and every actor on it).  A rank is
*failed* once its proc died or missed its heartbeats, or once an actor on it failed
(its ``__init__`` or a ``broadcast`` endpoint raised...); a rank whose proc is
still running (a failed actor, a silent proc being killed) is SIGKILLed first.
Then, for each rank, in the background:

1. the new proc starts with the *same* key and addresses, rank, ``cfg`` and per-rank
   environment (``MONARCH_CY_RANK``, ``CUDA_VISIBLE_DEVICES``, ``env=...``);
2. the controller and every other live proc are told it is alive again (calls on
   it are no longer refused);
3. every actor mesh that had an actor on that rank is spawned there again, in the
   original spawn order, with the same name, address, rank, class and constructor
   arguments (kept by the controller), so ``__init__`` runs again; actor mesh
   references anyone holds (the controller's, pickled copies inside actors) keep
   working and now reach the new actors;
4. the Future resolves to the list of global ranks restarted once every re-spawned
   actor finished ``__init__`` (an ``__init__`` that raises fails the Future with
   ``SupervisionError``; a rank with no actors is ready when it answers a heartbeat).

Healthy ranks are untouched and keep serving throughout.  Actor meshes spawned by
actors of the failed rank (children on ``this_proc()``) are not re-created by the
runtime: their owner's re-run ``__init__`` may spawn them again.

Calls in flight at the moment of failure
----------------------------------------
* A call pending on the failed rank when the failure is detected raises
  ``SupervisionError`` (actor, rank, cause).  It may or may not have run on the old
  incarnation; it is *never* delivered to the new one: the sockets to a failed
  proc's addresses are closed at detection, discarding what was queued, and port ids
  are random per incarnation, so late replies meant for the old one are dropped.
* Calls made after detection and before ``respawn`` starts raise at once.
* Calls made after ``respawn()`` returned (even before its Future resolves) are
  held by the controller's node (:meth:`Node.hold`, in the order made) and sent to
  the new incarnation once it is started, after its ``__init__`` message; if the
  respawn fails they fail with ``SupervisionError`` ("respawn failed: ...").
* Whatever dies during the respawn, it resolves or fails within its bound: a new
  proc that exits before the respawn listens for its exit is still seen (its exit
  is checked once the listener is in place), and a dead fork server is replaced
  (:mod:`monarch_cy._actor.launch.launcher`).
* A mesh-wide ``call`` in flight fails as a whole with ``SupervisionError``; the
  survivors' parts of it ran (or run) to completion, their results are dropped.

Bad input: respawning a mesh stopped on purpose raises ``MeshStoppedError``;
``stop()`` during a respawn fails the respawn's Future with ``MeshStoppedError``.
"""

from __future__ import annotations

import threading
import time

from monarch_cy._checks import is_int
from monarch_cy._errors import MeshStoppedError, SupervisionError
from monarch_cy._telemetry.runtime import instruments as _telemetry
from monarch_cy._actor.base import client_faults, state as _state
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.meshes import heartbeat
from monarch_cy._actor.meshes.proc_state import _Proc, addrs_on, broadcast_dead
from monarch_cy._actor.model.ports import OneCollector
from monarch_cy._transport.protocol import REVIVE, SPAWN, pack, pack_call

__all__ = ["respawn", "start"]

READY_TIMEOUT_S = 120.0


def _failed(node, st, g) -> bool:
    p = st.procs[g]
    return (g in st.failed_ranks or not p.alive or p.silent or
            _state.proc_failure(node, p.key) is not None)


def respawn(pm, ranks, on_exit) -> Future:
    """``ProcMesh.respawn``: validate, then restart in the background.  ``on_exit(node,
    proc, code)``: what the pump does when a new incarnation exits."""
    st = pm._state
    node = _state.get_node()
    if st.stopped:
        raise MeshStoppedError(st.name, None, "cannot respawn a proc mesh that was "
                               "stopped on purpose; spawn a new one")
    granks = pm._shape.global_ranks()
    if any(st.procs[g].popen is None for g in granks):
        raise ValueError("cannot respawn the controller's own proc (this_proc())")
    if ranks is None:
        targets = [g for g in granks if _failed(node, st, g)]
    else:
        if is_int(ranks):
            ranks = [ranks]
        try:
            ranks = list(ranks)
        except TypeError:
            raise TypeError(f"ranks must be a list of ints or None, not {ranks!r}") \
                from None
        targets = []
        for r in ranks:
            if not is_int(r) or not 0 <= r < len(granks):
                raise ValueError(f"rank {r!r} is not a rank of this mesh "
                                 f"(0..{len(granks) - 1})")
            g = granks[r]
            if not _failed(node, st, g):
                raise ValueError(f"rank {r} of proc mesh {st.name!r} is healthy; "
                                 "respawn restarts failed ranks only")
            if g not in targets:
                targets.append(g)
    client_faults.note_recovered(st)
    _in_pump(node, lambda: _hold_calls(node, st, targets))
    return start(node, st, targets, 0.0, on_exit)


def _hold_calls(node, st, targets) -> None:
    """In the pump, before ``respawn()`` returns: calls made from now on to the
    target ranks are held by the node and sent to the new incarnation once it is
    up (or failed with SupervisionError if it never comes).  A live proc being
    replaced is marked down first, so that its pending calls end now and the held
    ones are not mistaken for them."""
    for g in targets:
        old = st.procs[g]
        _mark_down_if_live(node, st, old)
        node.hold(addrs_on(st, g, old))
        node.revive(old.key)          # calls are no longer refused: they are held


def start(node, st, targets, delay: float, on_exit, policy: bool = False) -> Future:
    """Respawn ``targets`` (global ranks; None: every failed rank at that moment)
    after ``delay`` seconds, in a background thread.  Thread-safe.  ``on_exit``: as
    for :func:`respawn`."""
    fut = Future._make(None)
    threading.Thread(target=_run, args=(node, st, targets, delay, policy, fut, on_exit),
                     daemon=True, name="monarch_cy-respawn").start()
    return fut


def _run(node, st, targets, delay, policy, fut, on_exit) -> None:
    started = time.time_ns()
    try:
        if delay > 0:
            end = time.monotonic() + delay
            while time.monotonic() < end and not st.stopped:
                time.sleep(min(0.05, max(0.0, end - time.monotonic())))
        with st.respawn_lock:
            if targets is None:
                targets = sorted(g for g in range(len(st.procs)) if _failed(node, st, g))
            else:                      # a respawn just before may have healed some
                healed = [g for g in targets if not _failed(node, st, g)]
                for g in healed:       # their calls were held for nothing: send them
                    _release(node, st, g)
                targets = [g for g in targets if g not in healed]
            waits = []
            for g in targets:
                waits += _restart_rank(node, st, g, on_exit)
            _wait_ready(node, st, waits)
            for g in targets:
                st.failed_ranks.discard(g)
        tel = _telemetry()
        if tel is not None:
            tel.respawned(st.name, targets, started)
        fut._set_result(list(targets))
    except BaseException as e:  # noqa: BLE001 - delivered through the Future
        if targets:
            _in_pump_quiet(node, lambda e=e: _give_up_held(node, st, targets, e))
        if policy and not st.stopped:
            from monarch_cy._log import logger  # deferred: import time (logging)
            logger("actor").error("restart policy of proc mesh %r failed: %s", st.name, e)
        fut._set_exception(e)


def _in_pump(node, fn) -> None:
    done = threading.Event()
    box = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001
            box.append(e)
        finally:
            done.set()
    node.call_in_pump(run)
    if not done.wait(30):
        raise TimeoutError("the controller's I/O thread did not answer within 30 s")
    if box:
        raise box[0]


def _in_pump_quiet(node, fn) -> None:
    try:
        _in_pump(node, fn)
    except BaseException as e:  # noqa: BLE001 - already failing; say so, go on
        from monarch_cy._log import logger  # deferred: import time (logging)
        logger("actor").error("respawn cleanup failed: %s", e)


def _release(node, st, g, first=None) -> None:
    """Send what was held for rank ``g``'s addresses (``first``: addr -> frames to
    send before them)."""
    first = first or {}
    for addr in addrs_on(st, g, st.procs[g]):
        node.release_held(addr, first.get(addr, ()))


def _give_up_held(node, st, targets, exc) -> None:
    """The respawn failed: calls held for ranks that did not come back fail (their
    ports end with SupervisionError through ``proc_failed``), nothing is sent."""
    cause = f"respawn failed: {exc}"
    for g in targets:
        p = st.procs[g]
        addrs = addrs_on(st, g, p)
        if node.discard_held(addrs) or \
                _state.proc_failure(node, p.key) is None and not p.up.is_set():
            node.proc_failed(p.key, cause, addrs)


def _mark_down_if_live(node, st, old) -> None:
    """In the pump: a proc still running (a failed actor on it, a silent one) is
    being replaced: its exit will be ours, not a failure, and its pending calls end
    now.  Idempotent."""
    if old.popen is not None and old.alive and not old.done.is_set() and \
            not old.replaced and not old.reported:
        old.replaced = True
        _mark_down(node, st, old)


def _check_stopped(st) -> None:
    if st.stopped:
        raise MeshStoppedError(st.name, None, "proc mesh stopped during respawn")


def _restart_rank(node, st, g, on_exit) -> list:
    """Replace the proc at global rank ``g``; returns ``(rank, future)`` to wait on."""
    old = st.procs[g]
    _check_stopped(st)
    if old.popen is not None and old.alive and not old.done.is_set():
        _in_pump(node, lambda: _mark_down_if_live(node, st, old))
        try:
            old.popen.kill()
        except OSError:
            pass
    if not old.done.wait(10):
        raise SupervisionError(st.name, g, "the failed proc did not exit within 10 s "
                               "of SIGKILL; cannot respawn it")
    _check_stopped(st)
    handle = old.starter()
    new = _Proc(g, old.key, handle, st, old.starter, old.daddr)
    new.remote = old.remote

    def revive():
        st.procs[g] = new
        _state.LIVE_PROCS[new.key] = new
        node.revive(new.key)
        client_faults.forget_seen((new.key, *addrs_on(st, g, new)))
        msg = pack((REVIVE, new.key))
        for other in list(_state.LIVE_PROCS.values()):
            if other is not new and other.popen is not None:
                node.send(other.key, [msg])
    _in_pump(node, revive)
    waits = []
    ready = {}                 # addr -> the __ready__ call, sent before held calls
    for rec in st.meshes:
        ent = rec.where.get(g)
        if ent is None:
            continue
        addr, i = ent
        try:
            data, extras = node.encode((rec.cls, rec.args, rec.kwargs), [new.key])
        except TypeError as e:
            raise TypeError(f"arguments of {rec.name} cannot be sent again: {e}") from None
        hdr = (SPAWN, rec.name, addr, i, rec.labels, rec.sizes, g, rec.owner)
        node.send(new.key, [pack(hdr, data), *extras])
        f = Future._make(node)
        port = node.register_port(OneCollector(f, new.key, rec.name, i))
        ready[addr] = [[pack_call("__ready__", node.direct_addr, port, 0, node.key, None)]]
        waits.append((g, f))

    def arm():
        # In the pump, where exits are reported: a proc that died before this point
        # (its exit seen with no one listening) fails now, never silently.
        # deferred: import time (the launcher loads when procs are first started)
        from monarch_cy._actor.launch.launcher import arm_exit
        _release(node, st, g, ready)
        arm_exit(handle, lambda code: on_exit(node, new, code))
    _in_pump(node, arm)
    if not waits:
        heartbeat.ping(node, new)
        waits.append((g, new))
    return waits


def _mark_down(node, st, old) -> None:
    """A live proc being replaced: its pending calls end now (SupervisionError)."""
    cause = "proc replaced by respawn (an actor on it had failed)"
    addrs = addrs_on(st, old.rank, old)
    node.proc_failed(old.key, cause, addrs)
    broadcast_dead(node, old, cause, addrs)


def _wait_ready(node, st, waits) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    for g, w in waits:
        while True:
            _check_stopped(st)
            left = deadline - time.monotonic()
            if left <= 0:
                raise SupervisionError(st.name, g, f"respawned proc not ready within "
                                       f"{READY_TIMEOUT_S:g} s")
            if isinstance(w, Future):
                try:
                    w.get(min(0.2, left))
                    break
                except TimeoutError:
                    continue
            else:
                if w.up.wait(min(0.2, left)):
                    break
                if not w.alive:
                    raise SupervisionError(st.name, g, "respawned proc exited at start")
                heartbeat.ping(node, w)
