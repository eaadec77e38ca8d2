"""``context().actor_instance.actor_id``: the text ``name[rank]`` with Monarch's
``actor_name``, in the client and in an actor, and after pickling."""

from __future__ import annotations

import pickle

from monarch_cy._actor.model.actor import ActorId, context


def test_client_actor_id_names_the_client():
    aid = context().actor_instance.actor_id
    assert aid == "client[0]" and aid.actor_name == "client"


def test_actor_id_survives_pickling_as_text_and_name():
    aid = ActorId("trainer[3]", "trainer")
    back = pickle.loads(pickle.dumps(aid))
    assert isinstance(back, ActorId) and back == "trainer[3]" and back.actor_name == "trainer"
    assert hash(back) == hash("trainer[3]") and f"{back}" == "trainer[3]"


def test_an_actors_id_names_its_mesh():
    from monarch_cy.actor import Actor, endpoint, this_host

    class Who(Actor):
        @endpoint
        def who(self):
            aid = context().actor_instance.actor_id
            return str(aid), aid.actor_name

    pm = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        got = pm.spawn("named", Who).who.call().get(timeout=60).values()
        assert got == [("named[0]", "named"), ("named[1]", "named")]
    finally:
        pm.stop().get(timeout=60)
