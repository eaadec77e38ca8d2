"""``@returns_future``: an async def whose call returns a monarch_cy Future."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import time

import pytest

from monarch_cy.actor import Future, returns_future

_var = contextvars.ContextVar("v", default="unset")


def test_needs_an_async_function():
    with pytest.raises(TypeError, match="async function"):
        returns_future(lambda: 1)


def test_body_runs_only_when_observed_and_once():
    ran = []

    @returns_future
    async def body(x):
        ran.append(x)
        await asyncio.sleep(0)
        return x + 1

    f = body(1)
    assert isinstance(f, Future) and ran == [] and not f.done()
    assert f.get(5) == 2 and f.get(5) == 2 and ran == [1] and f.done()
    assert asyncio.run(_await(f)) == 2 and ran == [1]


async def _await(f):
    return await f


def test_await_runs_on_the_awaiting_loop_and_errors_raise():
    seen = {}

    @returns_future
    async def body():
        seen["loop"] = asyncio.get_running_loop()
        raise KeyError("k")

    async def main():
        with pytest.raises(KeyError):
            await body()
        return asyncio.get_running_loop()
    assert asyncio.run(main()) is seen["loop"]


def test_context_is_the_callers_copy():
    @returns_future
    async def body():
        v = _var.get()
        _var.set("inner")
        return v

    token = _var.set("outer")
    try:
        f = body()
        _var.set("changed")
        assert f.get(5) == "outer" and _var.get() == "changed"
    finally:
        _var.reset(token)


def test_get_timeout_cancels_the_body():
    state = []

    @returns_future
    async def slow():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            state.append("cancelled")
            raise

    f = slow()
    t = time.monotonic()
    with pytest.raises(TimeoutError):
        f.get(0.2)
    assert time.monotonic() - t < 5 and state == ["cancelled"]
    with pytest.raises(TimeoutError):
        f.get(1)                        # the outcome stands


def test_get_inside_a_running_loop_uses_a_helper_thread():
    @returns_future
    async def body():
        return threading.current_thread().name

    async def main():
        with pytest.warns(UserWarning, match="active event loop"):
            return body().get(5)
    assert asyncio.run(main()) == "returns_future"


def test_other_threads_share_the_outcome():
    gate = threading.Event()

    @returns_future
    async def body():
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return "v"

    f = body()
    out = []
    t = threading.Thread(target=lambda: out.append(f.get(10)))
    t.start()                     # the first observer owns the body
    time.sleep(0.1)
    waiter = threading.Thread(target=lambda: out.append(f.get(10)))
    waiter.start()
    gate.set()
    t.join(10)
    waiter.join(10)
    assert out == ["v", "v"]


def test_unobserved_body_is_closed_unstarted():
    ran = []

    @returns_future
    async def body():
        ran.append(1)

    f = body()
    del f
    gc.collect()
    assert ran == []


def test_method_and_actor_use(procs, name):
    from _actors import Echo
    m = procs.slice(gpus=0).spawn(name, Echo, "x")

    class Client:
        @returns_future
        async def twice(self, x):
            a = await m.ping.call_one(x)
            b = await m.ping.call_one(a + 1)
            return [a, b]

    assert Client().twice(3).get(10) == [3, 4]
    m.stop().get(10)
