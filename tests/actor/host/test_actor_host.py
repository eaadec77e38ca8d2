"""ActorHost: an actor survives what it cannot send and what it cannot read.

Every call resolves: a result that cannot be pickled (any exception, not only
pickle's own), one nested too deeply, one that cannot be unpickled by the caller,
and a malformed record from an authenticated peer each fail the one message
concerned -- with an error naming the endpoint, the rank and the cause -- and the
actor serves the next message.
"""

from __future__ import annotations

import pytest

from monarch_cy.actor import ActorError

from _bad_results import AsyncBadResults, BadResults

T = 20


@pytest.fixture
def bad(procs, name):
    return procs.slice(gpus=slice(0, 2)).spawn(name, BadResults)


@pytest.mark.parametrize("exc_name", ["ValueError", "RuntimeError", "KeyError"])
def test_result_that_refuses_to_pickle_fails_that_call_only(bad, exc_name):
    before = bad.count.call().get(T).values()
    with pytest.raises(ActorError) as ei:
        bad.slice(gpus=1).refuses.call_one(exc_name).get(T)
    text = str(ei.value)
    assert "refuses" in text and "cannot be sent" in text, text
    assert exc_name in text and "refuses to be pickled" in text, text
    assert ei.value.rank == 1, ei.value.rank
    after = bad.count.call().get(T).values()
    assert after[1] == before[1] + 2 and after[0] == before[0] + 1, (before, after)


def test_result_nested_too_deeply_fails_that_call_only(bad):
    with pytest.raises(ActorError, match="too deeply|RecursionError"):
        bad.slice(gpus=0).too_deep.call_one().get(T)
    assert isinstance(bad.slice(gpus=0).count.call_one().get(T), int)


def test_result_that_cannot_be_unpickled_by_the_caller(bad):
    with pytest.raises(ActorError, match="could not be unpickled") as ei:
        bad.slice(gpus=0).unpicklable_here.call_one().get(T)
    assert "unpickled in the wrong place" in str(ei.value)
    assert isinstance(bad.slice(gpus=0).count.call_one().get(T), int)


def test_async_endpoint_result_that_refuses_to_pickle(procs):
    a = procs.slice(gpus=2).spawn("async_bad_results", AsyncBadResults)
    with pytest.raises(ActorError, match="cannot be sent"):
        a.refuses.call_one().get(T)
    assert a.ping.call_one(7).get(T) == 7
    a.stop().get(T)


@pytest.mark.parametrize("record", [b"", b"\x00", b"\xff" * 7, b"not a header at all" * 3])
def test_malformed_record_from_an_authenticated_peer_is_dropped(bad, record):
    from monarch_cy._actor.base.state import get_node
    node = get_node()
    target = bad.slice(gpus=1)
    addr = target._addrs[target._granks()[0]]
    node.send(addr, [record])
    node.send(addr, [record, b"extra frame"])
    assert isinstance(target.count.call_one().get(T), int)


@pytest.mark.parametrize("exc_name", ["ValueError", "RuntimeError"])
def test_argument_that_refuses_to_pickle_raises_its_error_naming_the_endpoint(bad, exc_name):
    import builtins

    from _bad_results import RefusesToPickle
    exc_type = getattr(builtins, exc_name)
    with pytest.raises(exc_type, match="this object refuses") as ei:
        bad.count.call(RefusesToPickle(exc_type))
    assert type(ei.value) is exc_type
    assert ei.value.__notes__ == [
        f"(raised while pickling the arguments of endpoint {bad._name}.count)"]
    with pytest.raises(TypeError, match="too deeply"):
        bad.slice(gpus=0).count.call_one(__import__("_bad_results").nested(200_000))
    assert isinstance(bad.slice(gpus=0).count.call_one().get(T), int)
