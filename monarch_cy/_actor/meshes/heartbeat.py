"""Heartbeats: a proc that stops answering is declared failed, then killed.

The controller's pump sends ``HEARTBEAT`` to every live proc of a proc mesh every
``interval`` (a quarter of the timeout, between 50 ms and 1 s); the proc's pump
(its main thread, which no actor code runs on) answers ``HEARTBEAT_ACK``.  A proc
whose last answer (or start) is older than ``timeout`` is failed with the cause
``"no heartbeat for N s ..."`` (pending calls raise ``SupervisionError``, the
failure goes to the client like any other) and then SIGKILLed, so that it cannot
come back half-alive.  This catches a SIGSTOPped proc, and a proc whose interpreter
is wedged (an endpoint deadlocked inside C code that holds the GIL).  An endpoint
thread blocked *without* the GIL leaves the pump answering: bound such calls with
per-call timeouts (``endpoint.with_timeout(s)``) instead.

Many procs due a heartbeat at once get it down the cast tree
(:mod:`monarch_cy._actor.cast.heartbeat`): the controller sends a few messages, not one per proc; a
proc that did not answer a tree heartbeat gets the next one directly, and only
direct heartbeats lead to a verdict.

A proc heard from within the last half interval is not sent one: an answer to a
heartbeat, or a call to a large mesh (cast down its tree, :mod:`monarch_cy._actor.cast.tree`) that
every actor of it answered, which proves each proc's interpreter runs.  So a
training loop calling a mesh of 1,024 procs pays for no heartbeats at all, and an
idle mesh is still watched.

``timeout``: ``spawn_procs(heartbeat_timeout=...)``, else
``MONARCH_CY_HEARTBEAT_TIMEOUT`` (seconds, default 10; 0 turns heartbeats off).
It also covers start-up: a proc that does not answer its first heartbeat within
``timeout`` of being started is failed.

Starved is not dead.  A late answer alone does not fail a proc of this host: the
kernel is asked first (``/proc/<pid>/stat``: its state and CPU time).  Death needs
no heartbeat at all (the pidfd or the fork server reports it at once).  A proc that
is *stopped* (state ``T``: SIGSTOP, a debugger) or *hung* (asleep, no CPU time used
since the previous look: a deadlock, a wedged interpreter) is failed at ``timeout``.
A proc that is *busy* (it used CPU time since the previous look: an endpoint holding
the GIL, a 2 GiB message being unpickled) or *starved* (runnable or in
uninterruptible I/O but not given a CPU: a spawn storm, memory pressure) is making
progress, and one whose I/O thread *waits for messages* (the heartbeat or its answer
is late on the way: a controller busy with hundreds of procs starting) is healthy;
each is left alone until the much longer ``busy_bound(timeout)``
(``max(10 * timeout, 60 s)``), after which it is failed as unresponsive.  A tick of
the controller's own that ran late (the controller itself was starved) fails no
one: the procs' answers may be waiting, unread, in its inbox.  Procs on other hosts
(no ``/proc`` to read here) keep the plain rule.
"""

from __future__ import annotations

import os
import time

from monarch_cy import _config
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.cast import heartbeat as heartbeat_tree
from monarch_cy._transport.protocol import HEARTBEAT, HEARTBEAT_ACK, pack

__all__ = ["default_timeout", "start", "ping", "handle_ack", "handle_heartbeat",
           "busy_bound", "verdict"]

_CLK_TCK = None


def default_timeout() -> float:
    return _config.heartbeat_timeout()


def ping(node, proc) -> None:
    """Send one heartbeat to ``proc`` (thread-safe)."""
    node.send(proc.key, [pack((HEARTBEAT,))])


def busy_bound(timeout: float) -> float:
    """How long a proc that is busy or starved (making progress) may go unanswered."""
    return max(10.0 * timeout, 60.0)


def _sample(pid: int):
    """``(state letter, CPU seconds used, main thread's wait channel)`` of process
    ``pid`` (the state of its liveliest thread; CPU time of all), or None if
    unknown."""
    global _CLK_TCK
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        with open(f"/proc/{pid}/wchan", "rb") as f:
            wchan = f.read().decode(errors="replace")
    except OSError:
        wchan = ""
    state = fields[0].decode()
    if state not in ("R", "D", "T", "t"):
        # The leader sleeps; another thread may be runnable (holding the GIL the
        # leader waits for, say): the process is as awake as its liveliest thread.
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    st = f.read().rsplit(b")", 1)[1].split()[0].decode()
                if st in ("R", "D"):
                    state = st
                    break
        except (OSError, IndexError):
            pass
    if _CLK_TCK is None:
        _CLK_TCK = os.sysconf("SC_CLK_TCK")
    return state, (int(fields[11]) + int(fields[12])) / _CLK_TCK, wchan


_WAITING_FOR_IO = ("poll", "select")      # do_sys_poll, do_epoll_wait, do_select...


def verdict(state: str, cpu_used: float, wchan: str = "") -> str:
    """What a late answer means, from the proc's kernel ``state``, the CPU seconds
    it used since the previous look and where its main thread (the pump, which
    answers heartbeats) waits: ``"stopped"`` or ``"hung"`` (both fail at the
    heartbeat timeout: stopped, or asleep using no CPU with the pump blocked on
    something other than I/O -- the GIL, a lock), else ``"busy"`` (using CPU),
    ``"starved"`` (runnable, or in uninterruptible I/O, but not given a CPU) or
    ``"waiting"`` (the pump waits for messages: the heartbeat or its answer is late
    on the way, e.g. a controller busy with hundreds of procs starting)."""
    if state in ("T", "t"):
        return "stopped"
    if cpu_used > 0:
        return "busy"
    if state in ("R", "D") or wchan == "0":     # "0": it was running as we looked
        return "starved"
    if any(w in wchan for w in _WAITING_FOR_IO):
        return "waiting"
    return "hung"


def _judge(p, now: float, quiet: float, timeout: float):
    """The cause to fail ``p`` with now, or None to leave it (see the docstring)."""
    prev = getattr(p, "cpu_sample", None)
    pid = getattr(p.popen, "pid", None)
    sample = None if p.remote or pid is None else _sample(pid)
    if sample is None:                # another host, or gone (its exit is coming)
        if p.remote:
            return (f"no heartbeat for {quiet:.1f} s (proc hung, stopped or deadlocked; "
                    f"heartbeat timeout {timeout:g} s); killed")
        return None
    p.cpu_sample = sample
    if prev is None and sample[0] not in ("T", "t"):
        return None                   # first look: CPU use is judged at the next tick
    v = verdict(sample[0], sample[1] - prev[1] if prev is not None else 0.0, sample[2])
    if v == "stopped":
        return (f"no heartbeat for {quiet:.1f} s: the proc is stopped (SIGSTOP or a "
                f"debugger; heartbeat timeout {timeout:g} s); killed")
    if v == "hung":
        return (f"no heartbeat for {quiet:.1f} s (proc hung or deadlocked: asleep, using "
                f"no CPU, its I/O thread blocked in {sample[2] or 'the kernel'}; "
                f"heartbeat timeout {timeout:g} s); killed")
    bound = busy_bound(timeout)
    if quiet > bound:
        return (f"no heartbeat for {quiet:.1f} s although the proc looks {v} (using CPU, "
                f"waiting for one or for messages) and the bound for that is {bound:g} s; "
                f"killed")
    return None


def start(node, state, timeout: float, on_silent) -> None:
    """Watch every proc of ``state`` from the controller's pump until it stops;
    ``on_silent(proc, cause)`` runs in the pump for a proc that went silent."""
    if not timeout:
        return
    interval = min(1.0, max(0.05, timeout / 4))
    last = [time.monotonic()]

    def tick():
        if state.stopped:
            heartbeat_tree.PLANS.forget(state)
            return
        now = time.monotonic()
        late = now - last[0] > interval + max(timeout / 2, 0.25)
        last[0] = now
        due = []
        for p in list(state.procs):
            if p.popen is None or not p.alive or p.silent:
                continue
            quiet = now - max(p.last_seen, p.started)
            if quiet > timeout and not late:
                cause = _judge(p, now, quiet, timeout)
                if cause is not None:
                    p.silent = True
                    on_silent(p, cause)
                    continue
            elif quiet <= timeout:
                p.cpu_sample = None
                if now - p.last_seen < interval / 2 and p.up.is_set():
                    continue      # it answered lately (a call, see below): no need
            due.append(p)
        tree, direct = heartbeat_tree.split(due, now)
        if tree:
            heartbeat_tree.send(node, state, tree, timeout)
        for p in direct:
            try:
                node.send(p.key, [pack((HEARTBEAT,))])
            except Exception:
                pass
        node.add_timer(interval, tick)
    node.add_timer(interval, tick)


def handle_ack(node, hdr, data, extras) -> None:
    """HEARTBEAT_ACK in the controller: ``(HEARTBEAT_ACK, proc key)``."""
    p = _state.LIVE_PROCS.get(hdr[1])
    if p is not None:
        p.last_seen = time.monotonic()
        p.up.set()


def handle_heartbeat(node, hdr, data, extras) -> None:
    """HEARTBEAT in a worker: answer at once from the pump."""
    node.send(node.controller_addr, [pack((HEARTBEAT_ACK, node.key))])
