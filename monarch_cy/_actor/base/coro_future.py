"""A Future of a coroutine (Monarch's ``Future._from_coro``, set on the Future class
when this module loads: the ``monarch_cy._actor`` package imports it): lazy, run by
whoever first waits for it.

``Future._from_coro(coro)`` returns a :class:`~.future.Future` that runs nothing
yet.  The first of these drives ``coro`` to its end and resolves the Future with its
result or its exception:

* ``await fut``: in the awaiting task (same loop, no thread);
* ``fut.get()`` (``result``, ``exception``) with no timeout, outside a running event
  loop: in the calling thread, on an event loop of its own;
* ``get`` with a timeout, or inside a running loop, or ``add_done_callback`` /
  ``done()``: on a daemon thread with its own loop (``get`` then waits for it as for
  any Future).

Later waiters wait for that one run; the coroutine never runs twice.  A coroutine
that never gets waited on never runs (and Python warns that it was never awaited,
as for any coroutine).
"""

from __future__ import annotations

import threading

from monarch_cy._actor.base.future import Future

__all__ = ["CoroFuture", "from_coro"]


class CoroFuture(Future):
    """A :class:`Future` whose value comes from a coroutine (module docstring)."""

    __slots__ = ("_coro", "_claim")

    def _pop(self):
        with self._claim:
            coro, self._coro = self._coro, None
            return coro

    async def _drive(self, coro):
        try:
            value = await coro
        except BaseException as e:
            self._set_exception(e)
            raise
        self._set_result(value)
        return value

    def _in_thread(self) -> None:
        coro = self._pop()
        if coro is None:
            return

        def run():
            import asyncio  # deferred: import time (only coroutine futures need it)
            try:
                asyncio.run(self._drive(coro))
            except BaseException:   # noqa: BLE001 - the Future holds it
                pass
        threading.Thread(target=run, daemon=True, name="monarch_cy-coro-future").start()

    def _wait(self, timeout) -> None:
        if self._coro is not None:
            import asyncio  # deferred: import time (only coroutine futures need it)
            if timeout is None and asyncio._get_running_loop() is None:
                coro = self._pop()
                if coro is not None:
                    try:
                        asyncio.run(self._drive(coro))
                    except BaseException:   # noqa: BLE001 - get() raises it below
                        pass
            else:
                self._in_thread()
        super()._wait(timeout)

    def done(self) -> bool:
        if self._coro is not None:
            self._in_thread()
        return super().done()

    def add_done_callback(self, fn, *, context=None) -> None:
        if self._coro is not None:
            self._in_thread()
        super().add_done_callback(fn, context=context)

    def __await__(self):
        coro = self._pop()
        if coro is not None:
            return (yield from self._drive(coro).__await__())
        return (yield from super().__await__())


def from_coro(coro) -> Future:
    """A lazy Future of ``coro`` (module docstring); also ``Future._from_coro``."""
    import inspect
    if not inspect.isawaitable(coro):
        raise TypeError(f"Future._from_coro takes a coroutine, not {coro!r}")
    f = CoroFuture._make(None)
    f._coro = coro
    f._claim = threading.Lock()
    return f


# Monarch's spelling, on the Future class (set here: future.py cannot import this
# module, which subclasses it; the package imports this module).
Future._from_coro = staticmethod(from_coro)
