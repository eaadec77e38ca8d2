"""Accumulator over any object with a ``stream`` method (Monarch's fold), and
``Future._from_coro`` (Monarch's private constructor) that such a stream yields."""

from __future__ import annotations

import asyncio
import operator

import pytest

from monarch_cy.actor import Accumulator, Future


class FakeEndpoint:
    """An endpoint stand-in: records its stream calls, yields one Future per value."""

    def __init__(self, values, fail_at=None):
        self.values, self.fail_at, self.calls = values, fail_at, []

    def stream(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        for i, v in enumerate(self.values):
            yield Future._from_coro(self._value(i, v))

    async def _value(self, i, v):
        if i == self.fail_at:
            raise ValueError(f"rank {i} failed")
        return v


def test_folds_a_stream_left_to_right_from_identity():
    ep = FakeEndpoint([1, 2, 3])
    acc = Accumulator(ep, [], lambda a, r: a + [r])
    assert acc.accumulate("x", k=2).get(10) == [1, 2, 3]
    assert ep.calls == [(("x",), {"k": 2})]


def test_empty_stream_gives_identity_and_await_works():
    acc = Accumulator(FakeEndpoint([]), 42, operator.add)
    assert acc.accumulate().get(10) == 42

    async def main():
        return await Accumulator(FakeEndpoint([5, 6]), 0, operator.add).accumulate()
    assert asyncio.run(main()) == 11


def test_a_failed_value_fails_the_fold():
    fut = Accumulator(FakeEndpoint([1, 2, 3], fail_at=1), 0, operator.add).accumulate()
    with pytest.raises(ValueError, match="rank 1 failed"):
        fut.get(10)


def test_from_coro_runs_nothing_until_observed():
    ran = []

    async def body():
        ran.append(1)
        return "v"
    fut = Future._from_coro(body())
    assert ran == [] and not fut.done()
    assert fut.get(10) == "v" and ran == [1]


def test_bad_endpoint_and_merge_are_refused():
    with pytest.raises(TypeError, match="needs a mesh endpoint"):
        Accumulator(object(), 0, operator.add)
    with pytest.raises(TypeError, match="merge= needs a mesh endpoint"):
        Accumulator(FakeEndpoint([1]), 0, operator.add, merge=operator.add)
