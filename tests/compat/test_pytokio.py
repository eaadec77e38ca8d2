"""Monarch's PythonTask and Shared (monarch_cy.compat._pytokio), and the pending native
handles Monarch's tests assign to a host or proc mesh."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from monarch_cy.compat._pytokio import PythonTask, Shared


def test_block_on_spawn_and_await():
    async def seven():
        return 7
    assert PythonTask.from_coroutine(seven()).block_on() == 7
    shared = PythonTask.from_coroutine(seven()).spawn()
    assert shared.block_on() == 7 and shared.poll() == 7

    async def main():
        return await PythonTask.from_coroutine(seven()), await shared, \
            await shared.task()
    assert asyncio.run(main()) == (7, 7, 7)
    t = PythonTask.from_coroutine(seven())
    t.block_on()
    with pytest.raises(RuntimeError, match="already run"):
        t.block_on()
    assert Shared[int] is Shared and PythonTask[int] is PythonTask


def test_spawn_blocking_poll_and_errors():
    gate = threading.Event()
    shared = PythonTask.spawn_blocking(lambda: gate.wait() and "opened")
    assert shared.poll() is None
    gate.set()
    assert shared.block_on() == "opened"

    def boom():
        raise KeyError("k")
    with pytest.raises(KeyError):
        PythonTask.spawn_blocking(boom).block_on()
    with pytest.raises(TypeError, match="callable"):
        PythonTask.spawn_blocking(3)
    with pytest.raises(TypeError, match="coroutine"):
        PythonTask.from_coroutine(lambda: 1)


def test_select_one_is_the_first_to_finish():
    slow = PythonTask.spawn_blocking(lambda: time.sleep(2) or 2)
    fast = PythonTask.spawn_blocking(lambda: 0)
    assert PythonTask.select_one([slow.task(), fast.task()]).block_on() == (0, 1)
    with pytest.raises(ValueError, match="at least one"):
        PythonTask.select_one([])


def test_a_pending_handle_assigned_to_a_host_mesh_reaches_its_slices():
    from monarch_cy.actor import this_host
    hm = this_host()
    native = hm._hy_host_mesh.block_on()
    gate = threading.Event()

    async def later():
        await PythonTask.spawn_blocking(gate.wait)
        return native
    saved = hm._inner_host_mesh
    try:
        hm._inner_host_mesh = PythonTask.from_coroutine(later()).spawn()
        sliced = hm._new_with_shape(hm._shape)
        assert hm._hy_host_mesh.poll() is None and sliced._hy_host_mesh.poll() is None
        gate.set()
        assert sliced._hy_host_mesh.block_on().region == sliced.region
    finally:
        hm._inner_host_mesh = saved


def _spawner_class():
    """An actor whose tasks read context() (made in a function: it travels by value)."""
    from monarch_cy.actor import Actor, context, endpoint

    class Spawner(Actor):
        @endpoint
        def same_context(self) -> list:
            cx = context()
            seen = []

            async def task():
                seen.append(cx is context())
                await asyncio.sleep(0.01)            # resumed: still this actor's
                seen.append(cx is context())

            PythonTask.from_coroutine(task()).spawn().block_on()
            PythonTask.spawn_blocking(lambda: seen.append(cx is context())).block_on()
            return seen + [context() is cx]
    return Spawner


def test_tasks_spawned_by_an_actor_see_its_context():
    from monarch_cy.actor import context, this_host
    pm = this_host().spawn_procs()
    try:
        got = pm.spawn("spawner", _spawner_class()).same_context.call_one().get(30)
        assert got == [True, True, True, True]
    finally:
        pm.stop().get(30)
    # outside an actor, a task sees the client's context
    client = context()

    async def read():
        return context() is client
    assert PythonTask.from_coroutine(read()).block_on() is True
