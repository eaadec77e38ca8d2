"""The client's context: made once, at first use, and read through
``client_context.get()`` by every ``context()`` outside an actor."""

from __future__ import annotations

import threading
from unittest import mock

from monarch_cy._actor.model import actor as actor_mod
from monarch_cy.actor import Actor, context, endpoint


def test_context_outside_actors_asks_the_holder_each_time():
    real = actor_mod.client_context.get
    with mock.patch.object(actor_mod.client_context, "get", side_effect=real) as get:
        threads = [threading.Thread(target=context) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert get.call_count == 20
    assert context() is context()                     # one client Context
    assert context().actor_instance.actor_id == "client[0]"
    assert actor_mod.client_context._val is context()


class ReadsHolder(Actor):
    @endpoint
    def made(self) -> bool:
        context()                                     # an actor's own, not the client's
        return actor_mod.client_context._val is not None


def test_an_actor_never_makes_the_client_context(procs):
    m = procs.spawn("holder", ReadsHolder)
    made = m.made.call().get(30).values()
    assert made == [False] * 4, made
