"""Running an actor's supervision code (``__supervise__``, ``__cleanup__``) bounded in
time, on a helper thread with the actor's context.
"""

from __future__ import annotations

import threading

from monarch_cy import _config
from monarch_cy._actor.base import state
from monarch_cy._actor.model.actor import _message

__all__ = ["call_with_timeout", "supervise_timeout", "one_line"]


def one_line(exc) -> str:
    """``Type: text`` of ``exc`` on one line (its type alone when the text is empty)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        text = "<str() failed>"
    return f"{type(exc).__qualname__}: {text}" if text else type(exc).__qualname__


def supervise_timeout() -> float:
    """Seconds a ``__supervise__`` may take before it counts as hung
    (``MONARCH_CY_SUPERVISE_TIMEOUT``, default 10; read in the actor's proc).
    ``__cleanup__``'s is ``MONARCH_CY_CLEANUP_TIMEOUT`` (Monarch's ``cleanup_timeout``,
    default 3)."""
    return _config.supervise_timeout()


def call_with_timeout(fn, timeout: float, inst=None):
    """Run ``fn()`` in a helper thread (with ``inst`` as its actor context);
    ``(True, value)``, ``(False, exc)`` if it raised, or ``(False, TimeoutError)`` if
    it did not return within ``timeout`` (the thread is left running).  A coroutine
    result is run to completion there."""
    box = []

    def run():
        if inst is not None:
            state.local.instance = inst
            _message.set((inst.rank.rank, None))    # its message rank: its own
        try:
            v = fn()
            if hasattr(v, "__await__") and hasattr(v, "send"):
                import asyncio  # deferred: import time (a coroutine is rare here)
                v = asyncio.run(v)
            box.append((True, v))
        except BaseException as e:  # noqa: BLE001 - reported to the caller
            box.append((False, e))
    t = threading.Thread(target=run, daemon=True, name="monarch_cy-supervise")
    t.start()
    t.join(timeout)
    if not box:
        return False, TimeoutError(f"did not return within {timeout} s")
    return box[0]
