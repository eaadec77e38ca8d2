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

``timeout``: ``spawn_procs(heartbeat_timeout=...)``, else
``MONARCH_CY_HEARTBEAT_TIMEOUT`` (seconds, default 10; 0 turns heartbeats off).
It also covers start-up: a proc that does not answer its first heartbeat within
``timeout`` of being started is failed.
"""

from __future__ import annotations

import time

from monarch_cy import _config
from monarch_cy._transport.protocol import HEARTBEAT, HEARTBEAT_ACK

__all__ = ["default_timeout", "start", "ping", "handle_ack", "handle_heartbeat"]


def default_timeout() -> float:
    return _config.heartbeat_timeout()


def _pack(hdr):
    from monarch_cy._transport.protocol import pack
    return pack(hdr)


def ping(node, proc) -> None:
    """Send one heartbeat to ``proc`` (thread-safe)."""
    node.send(proc.key, [_pack((HEARTBEAT,))])


def start(node, state, timeout: float, on_silent) -> None:
    """Watch every proc of ``state`` from the controller's pump until it stops;
    ``on_silent(proc, cause)`` runs in the pump for a proc that went silent."""
    if not timeout:
        return
    interval = min(1.0, max(0.05, timeout / 4))

    def tick():
        if state.stopped:
            return
        now = time.monotonic()
        for p in list(state.procs):
            if p.popen is None or not p.alive or p.silent:
                continue
            quiet = now - max(p.last_seen, p.started)
            if quiet > timeout:
                p.silent = True
                on_silent(p, f"no heartbeat for {quiet:.1f} s (proc hung, stopped or "
                             f"deadlocked; heartbeat timeout {timeout:g} s); killed")
                continue
            try:
                node.send(p.key, [_pack((HEARTBEAT,))])
            except Exception:
                pass
        node.add_timer(interval, tick)
    node.add_timer(interval, tick)


def handle_ack(node, hdr, data, extras) -> None:
    """HEARTBEAT_ACK in the controller: ``(HEARTBEAT_ACK, proc key)``."""
    from monarch_cy._actor import controller
    p = controller.LIVE_PROCS.get(hdr[1])
    if p is not None:
        p.last_seen = time.monotonic()
        p.up.set()


def handle_heartbeat(node, hdr, data, extras) -> None:
    """HEARTBEAT in a worker: answer at once from the pump."""
    node.send(node.controller_addr, [_pack((HEARTBEAT_ACK, node.key))])
