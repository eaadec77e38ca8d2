"""Stopping the actors of this proc, and the proc itself (a worker's ``STOP``).

Every actor finishes the messages sent to it before the stop, runs
``__cleanup__(None)`` and drops its instance; later messages are answered with
``MeshStoppedError``.  Then the proc flushes what it still has to send and exits
as a Python program does, as Monarch's procs do: ``atexit`` handlers run and the
interpreter is finalized (module globals' ``__del__`` included), within
``FINALIZE_S`` seconds, after which it exits anyway.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time

from monarch_cy._log import logger
from monarch_cy._actor.base import state as _state

__all__ = ["stop_hosts", "stop_proc", "ExitProc", "FINALIZE_S"]

#: Seconds a stopping proc gives its interpreter's finalization (``atexit``
#: handlers, module teardown) before it exits with status 0 regardless.
FINALIZE_S = 2.0


class ExitProc(BaseException):
    """Raised by :func:`stop_proc` out of the worker's pump: the worker's entry
    point lets it end the program normally, so that the interpreter finalizes.
    A ``BaseException`` so that no handler of the pump's swallows it."""


def stop_hosts(node, timeout: float, stopped=()) -> None:
    """The proc is stopping: every actor of it stops (module docstring).
    ``stopped``: actor addresses the stopper already sent ``__stop__`` to (on the
    same connection as its calls, so those calls run first); the others get one from
    here.  Waits at most ``timeout`` s in all (a stuck endpoint cannot hold the
    stop).  Runs in the pump, which keeps serving meanwhile: CURVE handshakes (our
    own connections to the actors' sockets, which carry ``__stop__``, must
    authenticate) and the inbox (a ``__stop__`` sent down a cast tree may still have
    to be forwarded, here and to the procs below)."""
    hosts = list(_state.HOSTS.values())
    stopped = set(stopped)
    for h in hosts:
        if h.addr not in stopped:
            h.post("__stop__")
    node.serve_for(timeout, lambda: all(h.stopped.is_set() for h in hosts))


_stopping = False


def stop_proc(node, hdr, data, extras) -> None:
    """``STOP`` in a worker: ``(STOP[, actor addresses already sent __stop__])``.
    Stops the actors (at most 1.5 s), collects their cycles (their ``__del__`` runs),
    flushes output and queued messages (about 1 s at most), and raises
    :class:`ExitProc` for the worker's entry point to end the program with status 0
    (the interpreter finalizes; a daemon watchdog exits after ``FINALIZE_S`` s if
    that hangs).  Never returns; a second STOP handled while the first waits is
    ignored."""
    global _stopping
    if _stopping:
        return
    _stopping = True
    try:
        stop_hosts(node, 1.5, hdr[1] if len(hdr) > 1 else ())
        gc.collect()                        # actors' __del__ (cycles included)
    except Exception:  # noqa: BLE001
        logger("actor").exception("stopping this proc's actors failed")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    node.close_for_exit(1.0, 1.0)
    threading.Thread(target=_exit_after, args=(FINALIZE_S,), daemon=True,
                     name="monarch_cy-finalize-watchdog").start()
    raise ExitProc


def _exit_after(seconds: float) -> None:
    time.sleep(seconds)
    os._exit(0)           # finalization hung (a non-daemon thread, an atexit handler)
