"""An async actor's supervision, stop and failure, on its own event loop.

An actor with ``async def`` endpoints runs an asyncio loop on its thread
(:mod:`.actor_host`).  As in Monarch, what ends or supervises such an actor runs on
that same loop, never in another thread:

* ``__supervise__`` (``def`` or ``async def``) runs in a task of its own, one failure
  at a time in arrival order, at any ``await`` of the endpoint in progress: it does
  not wait for that endpoint's turn (an endpoint may itself wait for a child's
  failure to be supervised).  An ``async def`` one is bounded by
  ``supervise_timeout()``; a ``def`` one runs on the loop to its end.
* A stop (``__stop__``, ``__stop_mesh__``): the actor's running tasks (endpoints,
  ``@concurrent_endpoint`` bodies, a pending ``__supervise__``) are cancelled and
  have ended (at most ``supervise_timeout()``) *before* ``__cleanup__(None)`` runs
  on the loop (an ``async def`` one bounded by ``MONARCH_CY_CLEANUP_TIMEOUT``); then the instance is dropped, ``stopped`` is set and the stopper is
  answered.
* A failure (an endpoint with nowhere to reply raised, an unhandled child failure,
  ``abort``): the same cancellation, then ``__cleanup__(exc)``, then the owner hears
  of it.  Callers of the cancelled calls get the actor's ``SupervisionError`` (or
  ``MeshStoppedError``).

The class is mixed into :class:`~.actor_failure.ActorFailure` (whose state it uses:
``failed``, ``actor``, ``cleaned``, ``stopped``, ``node``, ``inst``, ``_loop``,
``_hold``).  Everything here runs on the actor's loop thread.
"""

from __future__ import annotations

from collections import deque

from monarch_cy import _config
from monarch_cy._log import logger
from monarch_cy._actor.host.supervise_call import one_line, supervise_timeout

__all__ = ["LoopLifecycle"]

_log = logger("actor")


class LoopLifecycle:
    """The async half of an actor's ending (see the module docstring)."""

    _loop = None             # the actor's event loop, once it runs one
    _sup_queue = None        # failures waiting for __supervise__, in arrival order
    _sup_task = None         # the task running them, while there is one

    # -- supervision -------------------------------------------------------------
    def _supervise_later(self, failure) -> None:
        """Queue ``failure`` for ``__supervise__`` in a task of the loop (on it)."""
        if self.failed is not None:
            self._pass_up(failure)
            return
        if self._sup_queue is None:
            self._sup_queue = deque()
        self._sup_queue.append(failure)
        if self._sup_task is None:
            self._sup_task = self._loop.create_task(self._supervise_queued())
            self._hold(self._sup_task)

    async def _supervise_queued(self) -> None:
        q = self._sup_queue
        try:
            while q and self.failed is None:
                failure = q.popleft()
                if self._covered(failure):
                    continue
                self._verdict(failure, await self._call_supervise(failure))
        finally:
            self._sup_task = None
            while q and self.failed is not None:
                self._pass_up(q.popleft())       # failed meanwhile: dropped

    async def _call_supervise(self, failure):
        """``None`` (no ``__supervise__``), ``(True, value)`` or ``(False, exc)``."""
        import asyncio  # deferred: import time (only async actors get here)
        import inspect  # deferred: as above
        fn = getattr(type(self.actor), "__supervise__", None)
        if fn is None:
            return None
        try:
            v = fn(self.actor, failure)
            if inspect.isawaitable(v):
                try:
                    v = await asyncio.wait_for(v, supervise_timeout())
                except asyncio.TimeoutError:
                    return False, TimeoutError(f"did not return within "
                                               f"{supervise_timeout()} s")
            return True, v
        except asyncio.CancelledError:
            if self.failed is not None:
                raise                   # stopped or failed meanwhile: this task ends
            return False, asyncio.CancelledError("__supervise__ was cancelled")
        except Exception as e:  # noqa: BLE001 - the verdict reports it
            return False, e

    # -- stop and failure --------------------------------------------------------
    def _stop_on_loop(self, reply) -> None:
        """The actor stops (``failed`` is already its ``MeshStoppedError``): cancel,
        clean up, drop the instance, then ``reply()``."""
        self._hold(self._loop.create_task(self._end(None, reply, stop=True)))

    def _fail_on_loop(self, exc, failure, then=None) -> None:
        """The actor failed (``failed`` is set): cancel, ``__cleanup__(exc)``, then
        report ``failure`` to the owner, then ``then()``.  Thread-safe."""
        loop = self._loop

        def start():
            self._hold(loop.create_task(self._end(
                exc, lambda: self._report(failure, then))))
        if _on(loop):
            start()
        else:
            loop.call_soon_threadsafe(start)

    async def _end(self, exc, then, stop: bool = False) -> None:
        import asyncio  # deferred: import time (only async actors get here)
        me = asyncio.current_task()
        late = [t for t in asyncio.all_tasks(self._loop) if t is not me]
        deadline = self._loop.time() + supervise_timeout()
        while late:
            for t in late:      # again each round: a body may swallow one (wait_for)
                t.cancel("actor stopped" if stop else "actor failed")
            left = deadline - self._loop.time()
            if left <= 0:
                _log.error("actor %s: %d task(s) still running %s s after being "
                           "cancelled", self.inst.actor_id, len(late), supervise_timeout())
                break
            _, pending = await asyncio.wait(late, timeout=min(left, 0.1))
            late = list(pending)
        try:
            if not self.cleaned.is_set():
                await self._cleanup_on_loop(exc)
        finally:
            if stop:
                self._drop_instance()
                self.stopped.set()
            then()

    async def _cleanup_on_loop(self, exc) -> None:
        """``__cleanup__(exc)`` on the loop (``async def`` ones bounded by
        ``MONARCH_CY_CLEANUP_TIMEOUT``, Monarch's ``cleanup_timeout``); a failure of it
        is logged."""
        import asyncio  # deferred: import time (only async actors get here)
        import inspect  # deferred: as above
        try:
            fn = getattr(type(self.actor), "__cleanup__", None) \
                if self.actor is not None else None
            if fn is not None:
                v = fn(self.actor, exc)
                if inspect.isawaitable(v):
                    await asyncio.wait_for(v, _config.cleanup_timeout())
        except BaseException as e:  # noqa: BLE001 - logged; the stop goes on
            _log.error("actor %s: __cleanup__ failed: %s", self.inst.actor_id,
                       one_line(e))
        finally:
            self.cleaned.set()


def _on(loop) -> bool:
    """Whether this thread runs ``loop`` now."""
    import asyncio  # deferred: import time (only async actors get here)
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
