"""``as_endpoint``: a plain method of a spawned actor, called with the adverbs
(Monarch's ``NotAnEndpoint`` and ``as_endpoint``)."""

from __future__ import annotations

import pytest

from monarch_cy.actor import ActorError, Channel, Endpoint, as_endpoint


@pytest.fixture
def plain(procs, name):
    from _actors import PlainMethods
    return procs.spawn(name, PlainMethods)


def test_plain_method_is_not_an_endpoint_until_wrapped(plain):
    with pytest.raises(RuntimeError, match="as_endpoint"):
        plain.add(1)
    ep = as_endpoint(plain.add)
    assert isinstance(ep, Endpoint)
    assert list(ep.call(1, y=2).get(10).values()) == [3, 3, 3, 3]


def test_every_adverb(plain):
    ep = as_endpoint(plain.add)
    assert as_endpoint(plain.slice(gpus=2).add).call_one(4, 1).get(10) == 5
    assert ep.choose(7).get(10) == 7
    assert sorted(f.get(10) for f in ep.stream(1)) == [1, 1, 1, 1]
    ep.broadcast(0)
    assert as_endpoint(plain.slice(gpus=1).add).with_timeout(10).call_one(2).get(10) == 2


def test_explicit_response_port(plain):
    ep = as_endpoint(plain.slice(gpus=3).via_port, explicit_response_port=True)
    assert ep.call_one(4).get(10) == 40


def test_errors(plain):
    with pytest.raises(ValueError, match="method of a spawned actor"):
        as_endpoint(plain.ping)            # already an endpoint
    with pytest.raises(ValueError, match="method of a spawned actor"):
        as_endpoint(lambda: 1)
    # an async def method on an actor whose endpoints are all def: TypeError
    with pytest.raises(ActorError, match="no event loop"):
        as_endpoint(plain.slice(gpus=0).not_here).call_one().get(10)
    assert plain.slice(gpus=0).ping.call_one(1).get(10) == 1     # the actor goes on


def test_async_actor_runs_both_kinds(procs, name):
    from _actors import AsyncPlain
    m = procs.slice(gpus=0).spawn(name, AsyncPlain)
    assert as_endpoint(m.double).call_one(4).get(10) == 8
    assert as_endpoint(m.triple).call_one(4).get(10) == 12
    m.stop().get(10)
