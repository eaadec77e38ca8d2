"""The adverbs, futures and endpoint errors, against 4 real worker procs."""

import asyncio
import threading

import pytest

from _actors import Recorder
from monarch_cy.actor import (Accumulator, ActorError, Future, ValueMesh, current_rank)


def test_call_gathers_value_mesh(echo):
    vm = echo.ping.call(7).get(10)
    assert isinstance(vm, ValueMesh) and vm.sizes == {"gpus": 4}
    assert vm.values() == [7, 7, 7, 7]
    who = echo.whoami.call().get(10)
    ranks = [w[1] for _, w in who]
    assert ranks == [0, 1, 2, 3]
    assert [w[2] for w in who.values()] == [{"gpus": i} for i in range(4)]
    assert len({w[4] for w in who.values()}) == 4          # 4 different processes


def test_call_one_and_slices(echo):
    assert echo.slice(gpus=2).ping.call_one("x").get(10) == "x"
    assert echo.slice(gpus=2).whoami.call_one().get(10)[1] == 2
    with pytest.raises(ValueError, match="exactly one"):
        echo.ping.call_one(1)
    sub = echo.slice(gpus=slice(1, 4, 2))
    assert [w[1] for w in sub.whoami.call().get(10).values()] == [1, 3]


def test_current_rank_is_the_rank_in_the_callers_slice(echo):
    """As in Monarch: current_rank()/current_size() describe the message, i.e. the
    mesh as the caller sliced it; the actor's own rank is context().actor_instance.rank."""
    assert echo.message_rank.call().get(10).values()[3] == (3, {"gpus": 3}, {"gpus": 4})
    assert echo.slice(gpus=2).message_rank.call_one().get(10) == (0, {}, {})
    sub = echo.slice(gpus=slice(1, 4, 2))
    assert sub.message_rank.call().get(10).values() == [(0, {"gpus": 0}, {"gpus": 2}),
                                                         (1, {"gpus": 1}, {"gpus": 2})]
    assert [w[1] for w in sub.whoami.call().get(10).values()] == [1, 3]
    assert echo.message_rank.choose().get(10) == (0, {"gpus": 0}, {"gpus": 1})


def test_choose_spreads(echo):
    ranks = {echo.whoami.choose().get(10)[1] for _ in range(8)}
    assert ranks == {0, 1, 2, 3}


def test_broadcast_and_ordering(procs, name):
    rec = procs.spawn(name, Recorder)
    for i in range(200):
        rec.record.broadcast(i)
    seen = rec.seen_list.call().get(10)
    for v in seen.values():
        assert v == list(range(200))      # per-sender FIFO, nothing lost


def test_stream_in_arrival_order(echo):
    futs = list(echo.sleep.stream(0.0))
    assert len(futs) == 4 and all(isinstance(f, Future) for f in futs)
    assert [f.get(10) for f in futs] == [0.0] * 4
    # a slow rank arrives last
    slow = echo.slice(gpus=0)
    f_slow = slow.sleep.call_one(0.3)
    got = [f.get(10) for f in echo.sleep.stream(0.0)]
    assert got == [0.0] * 4 or f_slow.get(10) == 0.3


def test_accumulator(echo):
    acc = Accumulator(echo.incr, 0, lambda a, b: a + b)
    before = sum(echo.incr.call(0).get(10).values())
    total = acc.accumulate(1).get(10)
    assert total == before + 4
    with pytest.raises(TypeError):
        Accumulator(lambda: 0, 0, sum)


def test_exception_keeps_serving(echo):
    with pytest.raises(ActorError) as ei:
        echo.slice(gpus=1).boom.call_one("kaput").get(10)
    err = ei.value
    assert isinstance(err.exception, ValueError) and "kaput" in err.remote_traceback
    assert "in boom" in err.remote_traceback and err.rank == 1 and err.endpoint == "boom"
    assert echo.slice(gpus=1).ping.call_one(5).get(10) == 5
    with pytest.raises(ActorError):
        echo.boom.call().get(10)


def test_non_endpoint_and_unknown(echo):
    with pytest.raises(AttributeError, match="not an endpoint"):
        echo.plain.call          # Monarch's NotAnEndpoint: as_endpoint(echo.plain) calls it
    with pytest.raises(RuntimeError, match="not annotated as an endpoint"):
        echo.plain()
    with pytest.raises(AttributeError, match="has no endpoint 'nope'"):
        echo.nope
    with pytest.raises(TypeError, match="adverb"):
        echo.ping(1)


def test_unpicklable_argument_fails_at_call_site(echo):
    with pytest.raises(TypeError, match="cannot be sent"):
        echo.ping.call(threading.Lock())
    assert echo.slice(gpus=0).ping.call_one(1).get(10) == 1


class _RaisesOnPickle:
    """Its own pickling code raises (Monarch's callers get that exception itself)."""

    def __getstate__(self):
        raise RuntimeError("__getstate__ error: on purpose")


def test_argument_whose_pickling_raises_gives_that_exception(echo):
    for call in (lambda: echo.ping.call(_RaisesOnPickle()),
                 lambda: echo.slice(gpus=0).ping.call_one(_RaisesOnPickle())):
        with pytest.raises(RuntimeError, match="__getstate__ error") as ei:
            call()
        assert not isinstance(ei.value, TypeError)
        assert any("arguments of endpoint" in n and ".ping" in n
                   for n in getattr(ei.value, "__notes__", ())), ei.value
    assert echo.slice(gpus=0).ping.call_one(2).get(10) == 2


def test_unpicklable_result_is_an_error(echo):
    with pytest.raises(ActorError, match="cannot be sent"):
        echo.slice(gpus=0).make_lock.call_one().get(10)
    assert echo.slice(gpus=0).ping.call_one(3).get(10) == 3


def test_get_timeout_does_not_lose_the_call(echo):
    f = echo.slice(gpus=3).sleep.call_one(0.4)
    with pytest.raises(TimeoutError):
        f.get(timeout=0.05)
    assert not f.done()
    assert f.get(10) == 0.4 and f.result() == 0.4 and f.exception() is None


def test_await_from_asyncio(echo):
    async def main():
        vals = await asyncio.gather(*[echo.slice(gpus=i % 4).ping.call_one(i)
                                      for i in range(20)])
        vm = await echo.ping.call("z")
        return vals, vm.values()
    vals, vm = asyncio.run(main())
    assert vals == list(range(20)) and vm == ["z"] * 4


def test_get_inside_event_loop_warns_and_blocks(echo):
    # As Monarch's: allowed (notebook cells run inside a loop), with a warning.
    async def main():
        f = echo.slice(gpus=0).sleep.call_one(0.3)
        with pytest.warns(UserWarning, match="within an active event loop"):
            v = f.get()
        return v, await f
    assert asyncio.run(main()) == (0.3, 0.3)


def test_controller_context():
    p = current_rank()
    assert p.rank == 0 and dict(p) == {}


def test_future_from_sync_awaited_later(echo):
    f = echo.slice(gpus=0).sleep.call_one(0.1)     # made outside any loop

    async def main():
        return await f
    assert asyncio.run(main()) == 0.1


def test_concurrent_waiters_and_done_polling(echo):
    import time
    results = {}

    def worker(i):
        results[i] = echo.slice(gpus=i % 4).sleep.call_one(0.05 * (i % 3)).get(10)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == {i: 0.05 * (i % 3) for i in range(8)}
    f = echo.slice(gpus=1).ping.call_one("polled")
    end = time.monotonic() + 10
    while not f.done() and time.monotonic() < end:
        time.sleep(0.001)
    assert f.done() and f.get(0) == "polled"
    seen = []
    g = echo.slice(gpus=2).sleep.call_one(0.05)
    g.add_done_callback(lambda fut: seen.append(fut.get(0)))
    end = time.monotonic() + 10
    while not seen and time.monotonic() < end:
        time.sleep(0.01)
    assert seen == [0.05]
