"""Future: the result of an endpoint call, awaitable or waited on synchronously.

Futures are made by the runtime (``Future(...)`` raises ``TypeError``).  They are
resolved exactly once, by whichever thread is pumping the process's inbox (the
node's I/O thread, or a caller blocked in :meth:`Future.get`, which takes over the
inbox while it waits so that a reply wakes it without a thread hop).

* ``get(timeout=None)`` blocks; on expiry it raises ``TimeoutError`` and the call is
  not lost: a later ``get`` or ``await`` still returns its value.
* ``await fut`` works in any asyncio loop and the loop itself pumps the reply inbox
  (no thread hop).  Each ``await`` is its own observer, as in Monarch: when the
  awaiting task is cancelled (``asyncio.wait_for``'s timeout, ``task.cancel()``) it
  stops waiting, and the Future is untouched (a later ``get``/``await`` still
  returns the reply).
* A Future also follows asyncio's future protocol, so ``asyncio.gather``/``wait``
  take it as is (no Task per call).  ``cancel()`` is asyncio's: the Future becomes
  cancelled (``get``/``await`` raise ``asyncio.CancelledError``), the remote call
  still runs and its reply is dropped; it returns False once the Future is done.
  ``gather``'s own cancellation cancels its Futures that way.  ``get()`` inside a running event loop warns
  (``UserWarning``) and blocks the loop, as Monarch's does (a notebook cell runs in
  a loop); await instead in async code.
* ``result(timeout=None)`` is ``get``; ``exception(timeout=None)`` returns the error
  or None.  Callbacks added with ``add_done_callback`` run in the resolving thread.
"""

from __future__ import annotations

import sys
from _thread import allocate_lock, get_ident
from typing import Any, Callable, Generic, TypeVar

__all__ = ["Future"]

R = TypeVar("R")
from monarch_cy._checks import check_timeout
from monarch_cy._transport.protocol import PENDING as _PENDING


#: ``coro -> Future`` owning the coroutine; :mod:`.returns_future` (one floor up, which
#: builds such Futures) sets it when imported, as ``monarch_cy.actor`` does.
_coroutine_future: Callable[[Any], "Future"] | None = None


class Future(Generic[R]):
    """Result of an asynchronous call. Not constructible by users."""

    __slots__ = ("_value", "_exc", "_lock", "_callbacks", "_waiter", "_self_wait",
                 "_asyncio_future_blocking", "_cancel_message", "_cancelled")

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("Future is not constructible by users; endpoint calls return one")

    # -- runtime side ------------------------------------------------------
    @classmethod
    def _make(cls, waiter=None) -> "Future":
        f = object.__new__(cls)
        f._value = _PENDING
        f._exc = None
        lock = allocate_lock()
        lock.acquire()
        f._lock = lock
        f._callbacks = None
        f._waiter = waiter  # object with wait(future, timeout) -> bool, or None
        f._self_wait = None
        f._asyncio_future_blocking = False
        f._cancel_message = None
        f._cancelled = False
        return f

    @classmethod
    def _resolved(cls, value=None, exc=None) -> "Future":
        f = cls._make()
        if exc is not None:
            f._set_exception(exc)
        else:
            f._set_result(value)
        return f

    @classmethod
    def _from_coro(cls, coro) -> "Future":
        """A Future owning ``coro``, run by its first observer (``await`` on the
        awaiting loop, ``get`` on a fresh loop), as :func:`returns_future` makes them;
        the caller's context variables go with it.  Monarch's private constructor,
        kept under its name for programs that build Futures from coroutines."""
        if _coroutine_future is None:
            raise RuntimeError("Future._from_coro needs monarch_cy.actor imported")
        return _coroutine_future(coro)

    @classmethod
    def _once(cls, inner: "Future", value=None) -> "Future":
        """A Future resolved to ``value`` once ``inner`` resolves, or to ``inner``'s
        exception; callbacks run in the thread that resolves ``inner``."""
        out = cls._make(None)

        def done(f):
            exc = f.exception()
            if exc is None:
                out._set_result(value)
            else:
                out._set_exception(exc)
        inner._then(done)
        return out

    def _set_result(self, value) -> None:
        if self._value is not _PENDING:
            return
        self._value = value
        self._finish()

    def _set_exception(self, exc: BaseException) -> None:
        if self._value is not _PENDING:
            return
        self._exc = exc
        self._value = None
        self._finish()

    def _finish(self) -> None:
        self._lock.release()
        cbs = self._callbacks
        if cbs:
            self._callbacks = None
            for _, cb in cbs:
                try:
                    cb(self)
                except Exception:  # a callback must not break the resolver
                    from monarch_cy._log import logger  # deferred: import time (logging)
                    logger("actor").exception("a Future's done callback %r raised", cb)

    def add_done_callback(self, fn: Callable[["Future"], Any], *, context=None) -> None:
        """Call ``fn(self)`` once resolved.

        Called inside a running asyncio loop (as asyncio does for ``gather`` and
        ``await``), ``fn`` is scheduled on that loop with ``call_soon``; elsewhere it
        runs in the thread that resolves the future (at once if already resolved).
        """
        aio = sys.modules.get("asyncio")
        loop = aio._get_running_loop() if aio is not None else None
        if loop is None:
            self._then(fn)
            return
        if self._value is not _PENDING:
            loop.call_soon(fn, self, context=context)
            return
        self._on_loop(loop, fn, inline=False, orig=fn, context=context)

    def _then(self, fn: Callable[["Future"], Any]) -> None:
        """The runtime's own ``fn(self)`` once resolved, in the thread that resolves
        it (at once if resolved), wherever it is called from.  Unlike
        :meth:`add_done_callback` inside a running asyncio loop, it never waits for
        that loop: the runtime's plumbing (a Future made of others, a blocked caller's
        wake-up) must work while the loop is blocked in a ``get()``."""
        w = self._waiter
        if w is not None and self._value is _PENDING:
            w.adopt()           # someone must pump the reply even if nobody waits
            self._add_callback(lambda f: w.unadopt())
        self._add_callback(fn)

    def _on_loop(self, loop, fn, *, inline: bool, orig=None, context=None) -> None:
        """Run ``fn(self)`` on ``loop`` once resolved (the loop pumps the reply
        inbox itself).  Resolved in the loop's own thread: at once (``inline``) or
        with ``call_soon``; from another thread: with ``call_soon_threadsafe``."""
        w = self._waiter
        if w is not None:
            w.loop_reader(loop)
        tid = get_ident()

        def cb(f):
            if get_ident() != tid:
                loop.call_soon_threadsafe(fn, f, context=context)
            elif inline:
                fn(f)
            else:
                loop.call_soon(fn, f, context=context)
        self._add_callback(cb, orig)

    def remove_done_callback(self, fn) -> int:
        """Remove callbacks added as ``fn``; return how many were removed."""
        cbs = self._callbacks or []
        keep = [c for c in cbs if c[0] is not fn]
        self._callbacks = keep or None
        return len(cbs) - len(keep)

    def _add_callback(self, fn, orig=None) -> None:
        if self._value is not _PENDING:
            fn(self)
            return
        if self._callbacks is None:
            self._callbacks = []
        self._callbacks.append((orig or fn, fn))
        if self._value is not _PENDING and self._callbacks:  # resolved meanwhile
            cbs, self._callbacks = self._callbacks, None
            for _, cb in cbs:
                cb(self)

    # -- asyncio future protocol (so gather/wait take it without wrapping a Task) --
    def get_loop(self):
        import asyncio
        return asyncio.get_running_loop()

    def cancel(self, msg=None) -> bool:
        """Cancel this Future (asyncio semantics): True if it was pending.  The remote
        call is not recalled; its reply, when it comes, is dropped."""
        if self._value is not _PENDING:
            return False
        import asyncio
        self._cancel_message = msg
        self._cancelled = True
        self._set_exception(asyncio.CancelledError(*(() if msg is None else (msg,))))
        return True

    def cancelled(self) -> bool:
        return self._cancelled

    def _make_cancelled_error(self):       # asyncio.gather asks a cancelled child
        import asyncio
        return asyncio.CancelledError(*(() if self._cancel_message is None
                                        else (self._cancel_message,)))

    # -- user side ---------------------------------------------------------
    def done(self) -> bool:
        """True once resolved (processes replies already received, never blocks)."""
        if self._value is _PENDING and self._waiter is not None:
            self._waiter.poke()
        return self._value is not _PENDING

    def _wait(self, timeout) -> None:
        if self._value is not _PENDING:
            return
        aio = sys.modules.get("asyncio")
        # (getattr: asyncio may be half-imported by another thread right now)
        running = getattr(aio, "_get_running_loop", None)
        if running is not None and running() is not None:
            # As Monarch: allowed (a notebook cell runs inside a loop), but it blocks
            # the loop, so other tasks wait and a reply that needs them deadlocks.
            import warnings
            warnings.warn("Future.get() called from within an active event loop: it "
                          "blocks the loop until the reply comes (await the future "
                          "instead in async code)", UserWarning, stacklevel=3)
        if timeout is not None:
            timeout = check_timeout("timeout", timeout, allow_zero=True)
            if timeout == float("inf"):
                timeout = None                 # wait as long as it takes
        if self._self_wait is not None:
            raise RuntimeError(
                f"{self._self_wait}: a sync actor waiting on a call to itself would "
                "deadlock (the call runs only after this endpoint returns); make the "
                "endpoint async and await it, or do not wait")
        w = self._waiter
        if w is not None:
            ok = w.wait(self, timeout)
        else:
            ok = self._lock.acquire(True, -1 if timeout is None else timeout)
            if ok:
                self._lock.release()
        if not ok and self._value is _PENDING:
            raise TimeoutError(f"call not answered within {timeout} s (it is still "
                               "pending; get() or await it again for the result)")

    def get(self, timeout: float | None = None) -> R:
        """Block until resolved; return the value or raise its error."""
        self._wait(timeout)
        if self._exc is not None:
            raise self._exc
        return self._value

    result = get

    def exception(self, timeout: float | None = None):
        """Block until resolved; return its error, or None if it succeeded."""
        self._wait(timeout)
        return self._exc

    def __await__(self):
        if self._value is _PENDING:
            aio = sys.modules.get("asyncio")
            loop = aio._get_running_loop() if aio is not None else None
            if loop is None:
                raise RuntimeError("a Future is awaited inside a running asyncio event "
                                   "loop; use get() outside one")
            # A loop future per await: cancelling the awaiting task cancels only it.
            return (yield from self._observer(loop).__await__())
        if self._exc is not None:
            raise self._exc
        return self._value

    def _observer(self, loop):
        """A fresh future of ``loop`` resolved as this one (one per await)."""
        out = loop.create_future()
        self._on_loop(loop, lambda f: _copy_into(out, f), inline=True)
        return out

    def as_asyncio(self):
        """An ``asyncio.Future`` of the running loop that resolves with this one
        (for APIs that insist on a real asyncio future; ``await fut`` needs none).
        Call it inside a running loop."""
        import asyncio
        loop = asyncio.get_running_loop()
        if self._value is not _PENDING:
            out = loop.create_future()
            _copy_into(out, self)
            return out
        return self._observer(loop)

    def __repr__(self):
        state = "pending" if self._value is _PENDING else (
            "error" if self._exc is not None else "done")
        return f"<Future {state}>"


def _copy_into(out, f) -> None:
    """Resolve the loop future ``out`` as the resolved Future ``f`` (once)."""
    if out.done():
        return
    exc = f._exc
    if exc is None:
        out.set_result(f._value)
    elif f.cancelled():
        out.cancel(f._cancel_message)
    else:
        out.set_exception(exc)
