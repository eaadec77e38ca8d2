"""Monarch's ``PythonTask`` and ``Shared`` (``monarch._rust_bindings.monarch_hyperactor.
pytokio``), over an asyncio event loop of their own.

Monarch runs Python coroutines on its Rust (tokio) runtime; programs and tests build
them with these two classes.  Here:

* ``PythonTask.from_coroutine(coro)`` wraps a coroutine; ``await task`` runs it in the
  awaiting task; ``task.block_on()`` runs it to its end on the background loop (one
  daemon thread, started on first use) and returns its result or raises its error;
  ``task.spawn()`` starts it there now and returns a :class:`Shared` of it.  A task
  runs once: a second use raises ``RuntimeError``.
* ``PythonTask.spawn_blocking(fn)`` runs ``fn()`` on a worker thread now and returns
  a :class:`Shared` of its result.
* ``PythonTask.select_one([t0, t1, ...])`` is a task whose result is ``(result,
  index)`` of the first of the tasks to finish (the others keep running).
* ``Shared``: ``poll()`` is the result once there (None before; the error raised if it
  failed), ``block_on()`` waits for it, ``await shared`` too, ``task()`` is a
  ``PythonTask`` awaiting it; any number of waiters.  ``Shared[T]`` is allowed in
  annotations.

A task spawned (or a function run with ``spawn_blocking``) inside an actor sees that
actor's :func:`~monarch_cy.actor.context`, the same object, as Monarch's tasks inherit
its context: each step of the coroutine (each call of the function) runs with the
spawning actor current on the thread that runs it.

Importing this module imports only the standard library.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Awaitable, Callable, Sequence

__all__ = ["PythonTask", "Shared"]

_loop = None
_loop_lock = threading.Lock()
_pool = None


def _background() -> asyncio.AbstractEventLoop:
    """The loop spawned tasks run on (a daemon thread, made on first use)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, daemon=True,
                             name="monarch_cy-pytokio").start()
            _loop = loop
        return _loop


def _blocking_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _loop_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                thread_name_prefix="monarch_cy-pytokio-blocking")
        return _pool


class Shared:
    """A result many may wait for (module docstring)."""

    __slots__ = ("_cf",)

    def __init__(self, cf: concurrent.futures.Future) -> None:
        self._cf = cf

    def __class_getitem__(cls, item):
        return cls

    def poll(self):
        return self._cf.result() if self._cf.done() else None

    def block_on(self):
        return self._cf.result()

    def task(self) -> "PythonTask":
        async def wait():
            return await self
        return PythonTask(wait())

    def __await__(self):
        return (yield from asyncio.wrap_future(self._cf).__await__())

    def __repr__(self) -> str:
        return f"<Shared {'done' if self._cf.done() else 'pending'}>"


class PythonTask:
    """A coroutine to run once (module docstring)."""

    __slots__ = ("_coro",)

    def __init__(self, coro: Awaitable) -> None:
        self._coro = coro

    def __class_getitem__(cls, item):
        return cls

    @classmethod
    def from_coroutine(cls, coro: Awaitable) -> "PythonTask":
        import inspect
        if not inspect.isawaitable(coro):
            raise TypeError(f"PythonTask.from_coroutine takes a coroutine, not {coro!r}")
        return cls(coro)

    def _take(self):
        coro, self._coro = self._coro, None
        if coro is None:
            raise RuntimeError("this PythonTask was already run (a task runs once)")
        return coro

    def spawn(self) -> Shared:
        coro = _as_spawner(self._take())

        async def run():
            return await coro
        return Shared(asyncio.run_coroutine_threadsafe(run(), _background()))

    def block_on(self):
        return self.spawn().block_on()

    def __await__(self):
        coro = self._take()
        return (yield from coro.__await__())

    @staticmethod
    def spawn_blocking(fn: Callable[[], Any]) -> Shared:
        if not callable(fn):
            raise TypeError(f"PythonTask.spawn_blocking takes a callable, not {fn!r}")
        inst = _spawning_actor()
        if inst is not None:
            fn = _with_actor(fn, inst)
        return Shared(_blocking_pool().submit(fn))

    @staticmethod
    def select_one(tasks: Sequence["PythonTask"]) -> "PythonTask":
        tasks = list(tasks)
        if not tasks:
            raise ValueError("PythonTask.select_one needs at least one task")

        async def first():
            running = {asyncio.ensure_future(_aw(t)): i for i, t in enumerate(tasks)}
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            fut = min(done, key=lambda f: running[f])
            return fut.result(), running[fut]
        return PythonTask(first())


def _spawning_actor():
    from monarch_cy._actor.base import state  # deferred: import time (the runtime)
    return getattr(state.local, "instance", None)


def _with_actor(fn: Callable[[], Any], inst) -> Callable[[], Any]:
    from monarch_cy._actor.base import state  # deferred: as above

    def call():
        prev = getattr(state.local, "instance", None)
        state.local.instance = inst
        try:
            return fn()
        finally:
            state.local.instance = prev
    return call


class _AsActor:
    """Awaitable driving ``coro`` with the actor ``inst`` current on the thread that
    runs each of its steps (restored after each)."""

    __slots__ = ("_coro", "_inst")

    def __init__(self, coro: Awaitable, inst) -> None:
        self._coro, self._inst = coro, inst

    def __await__(self):
        from monarch_cy._actor.base import state  # deferred: as above
        local, inst = state.local, self._inst
        it = self._coro.__await__()
        value, exc = None, None
        while True:
            prev = getattr(local, "instance", None)
            local.instance = inst
            try:
                step = it.throw(exc) if exc is not None else it.send(value)
            except StopIteration as stop:
                return stop.value
            finally:
                local.instance = prev
            try:
                value, exc = (yield step), None
            except BaseException as e:  # noqa: BLE001 - passed into the coroutine
                value, exc = None, e


def _as_spawner(coro: Awaitable) -> Awaitable:
    inst = _spawning_actor()
    return coro if inst is None else _AsActor(coro, inst)


async def _aw(task: PythonTask):
    return await task
