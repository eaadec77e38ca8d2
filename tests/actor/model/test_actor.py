"""Actors: references between actors, async actors, context, spawn validation."""

import pickle

import pytest

from _actors import AsyncEcho, AsyncEchoConcurrent, AsyncEchoInterleaved, BadInit, Clash, Echo
from monarch_cy.actor import Actor, ActorError, ActorMesh, endpoint, this_proc


def test_mesh_reference_passed_to_actors(procs, echo, name):
    caller = procs.spawn(name, Echo)
    out = caller.slice(gpus=0).call_other.call_one(echo.slice(gpus=slice(1, 3)), 9).get(10)
    assert out == [9, 9]
    # a reference kept as actor state and used later
    target = echo.slice(gpus=3)
    assert caller.hold.call(target).get(10).values() == [1] * 4
    before = target.incr.call_one(0).get(10)
    got = caller.call_held.call(1).get(10).values()
    assert sorted(got) == [before + i for i in range(1, 5)]


def test_mesh_pickles(echo):
    back = pickle.loads(pickle.dumps(echo.slice(gpus=slice(2, 4))))
    assert isinstance(back, ActorMesh) and back.sizes == {"gpus": 2}
    assert back.ping.call(1).get(10).values() == [1, 1]


def test_async_actor(procs, name):
    a = procs.spawn(name, AsyncEcho)
    assert a.ping.call(3).get(10).values() == [3] * 4
    one = a.slice(gpus=0)
    f1 = one.slow.call_one("slow", 0.3)
    f2 = one.slow.call_one("fast", 0.0)
    assert (f1.get(10), f2.get(10)) == ("slow", "fast")
    # as in Monarch, one message at a time: the slow call ends before the fast starts
    assert one.order.call_one().get(10) == ["slow", "fast"]


def test_concurrent_endpoints_and_interleaving_actors(procs, name):
    """@concurrent_endpoint bodies start in turn and let the next message in; an
    Actor subclass declared with interleave=True makes all of its async endpoints so."""
    for cls in (AsyncEchoConcurrent, AsyncEchoInterleaved):
        one = procs.slice(gpus=0).spawn(f"{name}{cls.__name__[-4:]}", cls)
        f1 = one.slow.call_one("slow", 0.3)
        f2 = one.slow.call_one("fast", 0.0)
        assert (f1.get(10), f2.get(10)) == ("slow", "fast")
        assert one.order.call_one().get(10) == ["fast", "slow"], cls
    with pytest.raises(TypeError, match="interleave must be True or False"):
        type("Bad", (Actor,), {}, interleave="yes")


def test_async_actor_calls_other(procs, echo, name):
    a = procs.spawn(name, AsyncEcho)
    assert a.slice(gpus=1).call_other.call_one(echo, 4).get(10) == [4] * 4
    # get() inside the actor's loop blocks it (with a warning), as in Monarch
    assert a.slice(gpus=1).get_inside_loop.call_one(echo.slice(gpus=0)).get(10) == 1


def test_init_failure_reported_on_call(procs, name):
    """A failed __init__ fails the actor: calls raise SupervisionError naming it."""
    from monarch_cy.actor import SupervisionError
    bad = procs.spawn(name, BadInit)
    with pytest.raises(SupervisionError, match="init failed on purpose") as ei:
        bad.ping.call(1).get(10)
    assert ei.value.actor == name and "__init__ raised RuntimeError" in ei.value.cause


def test_spawn_validation(procs, echo):
    # As in Monarch, a name may be used twice: two independent actor meshes.
    twin = procs.spawn("echo", Echo, "twin")
    assert twin.whoami.call().get(10).values() != echo.whoami.call().get(10).values()
    with pytest.raises(TypeError, match="subclass of Actor"):
        procs.spawn("x1", object)
    with pytest.raises(ValueError, match="reserved"):
        procs.spawn("x2", Clash)
    with pytest.raises(TypeError, match="name must be a str"):
        procs.spawn(3, Echo)
    import threading
    with pytest.raises(TypeError, match="cannot be sent"):
        procs.spawn("x3", Echo, threading.Lock())


def test_many_actors_per_proc(procs):
    meshes = [procs.spawn(f"many{i}", Echo, i) for i in range(24)]
    futs = [m.whoami.call() for m in meshes]
    for i, f in enumerate(futs):
        assert [w[0] for w in f.get(20).values()] == [i] * 4


def test_actor_in_controller_process():
    import os
    m = this_proc().spawn("local_echo", Echo)
    assert m.whoami.call_one().get(10)[4] == os.getpid()
    assert m.ping.call_one(2).get(10) == 2


def test_sync_actor_waiting_on_itself_is_refused(echo):
    one = echo.slice(gpus=2)
    with pytest.raises(ActorError, match="would deadlock"):
        one.call_self.call_one(one).get(10)
    # waiting on another actor is fine
    assert one.call_self.call_one(echo.slice(gpus=3)).get(10) == 1


def test_a_pending_async_endpoint_survives_a_garbage_collection():
    # Its task is referenced only by a cycle through the event it awaits: the runtime
    # must hold it, or a collection destroys it mid-call ("Task was destroyed but it
    # is pending") and its caller waits for nothing.
    import time
    from _actors import Hanger
    from monarch_cy.actor import this_host
    pm = this_host().spawn_procs(per_host={"procs": 1})
    try:
        m = pm.spawn("hanger", Hanger)
        pending = m.hang.call_one()
        deadline = time.monotonic() + 10
        while m.collect.call_one().get(10) != ["hang"] and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(3):
            assert m.collect.call_one().get(10) == ["hang"]
        with pytest.raises(TimeoutError):          # still waiting, not lost
            pending.get(0.2)
    finally:
        pm.stop().get(30)


def test_interleave_env_opts_every_async_actor_in(monkeypatch):
    """``MONARCH_CY_INTERLEAVE=1`` (read in the procs) makes every async actor's plain
    endpoints interleave, as ``interleave=True`` does: a get waiting for a put no
    longer blocks the put (one at a time, as Monarch 0.7.0, it would)."""
    from _actors import AsyncEcho
    from monarch_cy.actor import this_host
    monkeypatch.setenv("MONARCH_CY_INTERLEAVE", "1")
    pm = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        one = pm.spawn("interleaved_env", AsyncEcho)
        f1 = one.slow.call_one("slow", 0.3)
        f2 = one.slow.call_one("fast", 0.0)
        assert (f1.get(10), f2.get(10)) == ("slow", "fast")
        assert one.order.call_one().get(10) == ["fast", "slow"]
    finally:
        pm.stop().get(20)


class Named(Actor):
    """Reports how Monarch names it: ``str(actor_instance)`` and its creator chain."""

    @endpoint
    def names(self):
        from monarch_cy.actor import context
        inst = context().actor_instance
        chain, c = [], inst.creator
        while c is not None:
            chain.append((c.name, c.class_name))
            c = c.creator
        return str(inst), chain

    @endpoint
    def spawn_named(self, procs):
        return procs.spawn("inner", Named)


def test_instances_are_named_as_monarch_names_them_with_their_creators(procs, name):
    from monarch_cy.actor import context
    assert str(context().actor_instance) == "<root>"
    assert context().actor_instance.name == "root" and context().actor_instance.creator is None
    outer = procs.slice(gpus=slice(0, 2)).spawn(name, Named)
    text, chain = outer.slice(gpus=1).names.call_one().get(20)
    assert text == f"<root>.<test_actor.Named {name}{{'gpus': 1/2}}>"
    assert chain == [("root", None)]
    inner = outer.slice(gpus=0).spawn_named.call_one(procs.slice(gpus=slice(3, 4))).get(20)
    text, chain = inner.names.call_one().get(20)
    assert text == (f"<root>.<test_actor.Named {name}{{'gpus': 0/2}}>"
                    ".<test_actor.Named inner{'gpus': 0/1}>")
    assert chain == [(name, "test_actor.Named"), ("root", None)]
