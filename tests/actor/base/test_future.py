"""monarch_cy._actor.base.future: waiting, awaiting, cancelling (Monarch's semantics: each
await is its own observer; cancel() is asyncio's), and what stop does to a pending call."""

from __future__ import annotations

import asyncio
import time

import pytest

from _actors import Gate, Poller
from monarch_cy.actor import MeshStoppedError

pytestmark = pytest.mark.timeout(120)


def test_future_as_asyncio(procs):
    gate = procs.slice(gpus=0).spawn("gate_aio", Gate)

    async def main():
        fut = gate.wait.call_one()
        af = fut.as_asyncio()
        assert isinstance(af, asyncio.Future) and not af.done()
        await gate.open.call_one()
        return await af
    assert asyncio.run(main()) == "opened"


def test_wait_for_times_out_a_pending_call_inside_an_actor(procs):
    one = procs.slice(gpus=0)
    gate = one.spawn("gate_poll", Gate)
    poller = one.spawn("poller", Poller, gate)
    run = poller.run.call_one(0.2)
    time.sleep(0.7)
    poller.stop.call_one().get(10)
    assert run.get(10) >= 2             # each timeout fired; the loop then saw stop


def test_a_cancelled_await_leaves_the_future_usable(procs):
    gate = procs.slice(gpus=0).spawn("gate_await", Gate)

    async def main():
        fut = gate.wait.call_one()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(_await(fut), 0.2)     # a task awaiting it, cancelled
        assert not fut.done() and not fut.cancelled()
        await gate.open.call_one()
        return await fut
    assert asyncio.run(main()) == "opened"


async def _await(fut):
    return await fut


def test_future_cancel_follows_asyncio(procs):
    gate = procs.slice(gpus=0).spawn("gate_cancel", Gate)

    async def main():
        a, b = gate.wait.call_one(), gate.wait.call_one()
        with pytest.raises(asyncio.TimeoutError):        # gather's cancel reaches a, b
            await asyncio.wait_for(asyncio.gather(a, b), 0.2)
        assert a.cancelled() and b.cancelled() and a.done()
        with pytest.raises(asyncio.CancelledError):
            a.get()
        with pytest.raises(asyncio.CancelledError):
            await b
        await gate.open.call_one()
        c = gate.wait.call_one()
        assert await c == "opened"
        assert c.cancel() is False and not c.cancelled()  # done: cancel is refused
        return c.get()
    assert asyncio.run(main()) == "opened"


def test_stop_cancels_running_async_endpoints(procs):
    gate = procs.slice(gpus=0).spawn("gate_stop", Gate)
    pending = gate.wait.call_one()
    gate.stop().get(10)
    with pytest.raises(MeshStoppedError):
        pending.get(10)


def test_get_timeout_is_checked_and_infinity_waits(echo):
    import math
    for bad in (math.nan, "x", -1, True):
        f = echo.slice(gpus=0).ping.call_one(1)
        with pytest.raises(ValueError, match=r"^timeout must be .* got "):
            f.get(bad)
        assert f.get(10) == 1                 # the bad wait left the call intact
    assert echo.slice(gpus=0).sleep.call_one(0.2).get(math.inf) == 0.2
    assert echo.slice(gpus=0).ping.call_one(2).exception(math.inf) is None
