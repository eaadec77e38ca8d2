"""``@returns_future``: an ``async def`` whose call returns a :class:`Future`.

As Monarch's: calling the decorated function runs none of its body; it copies the
caller's context variables and returns a Future that *owns* the coroutine.  The first
observer starts it:

* ``await fut`` (or ``fut.as_asyncio()``) runs it as a task on the awaiting loop;
* ``fut.get(timeout)`` runs it to its end on a fresh event loop of the calling
  thread, as ``asyncio.run`` does (on a short-lived helper thread when the calling
  thread is already inside a running loop).  A timeout or an interrupt cancels the
  body, lets it clean up, and raises ``TimeoutError`` (or the interrupt); the Future
  then holds ``TimeoutError`` / ``CancelledError``.

Later observers (any thread, any loop) share that one outcome; the body runs at most
once.  A Future dropped before anyone observed it closes its coroutine unstarted.
``done()`` is False until the body has finished, and never starts it.
"""

from __future__ import annotations

import contextvars
import functools
import sys
import threading
from typing import Any, Callable, Coroutine, ParamSpec, TypeVar

from monarch_cy._actor.base import future as _future
from monarch_cy._actor.base.future import Future

__all__ = ["returns_future"]

P = ParamSpec("P")
T = TypeVar("T")

_CO_COROUTINE = 0x80


class _BodyFuture(Future):
    """A Future whose value is an unstarted coroutine's, run by its first observer."""

    __slots__ = ("_body", "_body_lock")

    @classmethod
    def _of(cls, coro, ctx) -> "_BodyFuture":
        f = cls._make(None)
        f._body = (coro, ctx)
        f._body_lock = threading.Lock()
        return f

    @classmethod
    def _owning(cls, coro) -> "_BodyFuture":
        """A Future owning ``coro`` with the caller's context variables
        (``Future._from_coro``)."""
        return cls._of(coro, contextvars.copy_context())

    def _take(self):
        with self._body_lock:
            body, self._body = self._body, None
        return body

    def __del__(self):
        body = getattr(self, "_body", None)
        if body is not None:
            body[0].close()              # never observed: runs none of its code

    # -- the owning observer ----------------------------------------------------
    def _start_on(self, loop, body):
        coro, ctx = body
        task = ctx.run(loop.create_task, coro)
        task.add_done_callback(self._publish)
        _RUNNING.add(task)               # the loop holds tasks weakly
        task.add_done_callback(_RUNNING.discard)
        return task

    def _publish(self, task) -> None:
        if task.cancelled():
            import asyncio  # deferred: import time (asyncio only once a body runs)
            self._set_exception(asyncio.CancelledError())
            return
        exc = task.exception()
        if exc is not None:
            self._set_exception(exc)
        else:
            self._set_result(task.result())

    def _drive(self, body, timeout) -> None:
        """Run the body on a fresh loop of this thread until it ends (``asyncio.run``)."""
        import asyncio  # deferred: import time (asyncio only once a body runs)
        loop = asyncio.new_event_loop()
        try:
            task = self._start_on(loop, body)
            try:
                done, _ = loop.run_until_complete(asyncio.wait({task}, timeout=timeout))
            except BaseException:
                self._set_exception(asyncio.CancelledError())
                task.cancel()
                loop.run_until_complete(asyncio.wait({task}))
                raise
            if not done:
                self._set_exception(TimeoutError(
                    f"returns_future body did not finish within {timeout} s (cancelled)"))
                task.cancel()
                loop.run_until_complete(asyncio.wait({task}))
        finally:
            try:
                rest = asyncio.all_tasks(loop)
                for t in rest:
                    t.cancel()
                if rest:
                    loop.run_until_complete(asyncio.wait(rest))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def _drive_on_helper(self, body, timeout) -> None:
        box = {}       # the helper's own error (an interrupt there): published already

        def run():
            try:
                self._drive(body, timeout)
            except BaseException as e:  # noqa: BLE001 - published; the waiter raises
                box["error"] = e
        helper = threading.Thread(target=run, name="returns_future", daemon=True)
        helper.start()
        helper.join()

    def _wait(self, timeout) -> None:
        body = self._take() if self._body is not None else None
        if body is not None:
            aio = sys.modules.get("asyncio")
            if aio is not None and aio._get_running_loop() is not None:
                import warnings  # deferred: import time (only for a get() inside a loop)
                warnings.warn("Future.get() called from within an active event loop: it "
                              "blocks the loop while the body runs on a helper thread "
                              "(await the future instead in async code)", UserWarning,
                              stacklevel=3)
                self._drive_on_helper(body, timeout)
            else:
                self._drive(body, timeout)
        Future._wait(self, timeout)

    def _observer(self, loop):
        body = self._take() if self._body is not None else None
        if body is not None:
            self._start_on(loop, body)
        return Future._observer(self, loop)

    def as_asyncio(self):
        body = self._take() if self._body is not None else None
        if body is not None:
            import asyncio  # deferred: import time (asyncio only once a body runs)
            self._start_on(asyncio.get_running_loop(), body)
        return Future.as_asyncio(self)


_RUNNING: set = set()
_future._coroutine_future = _BodyFuture._owning


def returns_future(function: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Future[T]]:
    """Make ``async def function`` return a :class:`Future` (see the module docstring).

    ``TypeError`` if ``function`` is not an ``async def``.  For class or static
    methods, put ``@classmethod``/``@staticmethod`` above ``@returns_future``.
    """
    code = getattr(function, "__code__", None)
    if code is None or not code.co_flags & _CO_COROUTINE:
        raise TypeError("returns_future requires an async function")

    @functools.wraps(function)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> Future[T]:
        coro = function(*args, **kwargs)
        try:
            return _BodyFuture._of(coro, contextvars.copy_context())
        except BaseException:
            coro.close()
            raise

    return wrapped
