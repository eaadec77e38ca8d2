"""Proc mesh spawn callbacks and ``Instance._children`` (Monarch's
``register_proc_mesh_spawn_callback``): each spawned mesh reaches every registered
callback before ``spawn_procs`` returns it, and is recorded as a child of the
spawning actor (the client here, an actor inside one)."""

from __future__ import annotations

import pytest

from monarch_cy.actor import Actor, ProcMesh, context, endpoint, this_host
from monarch_cy._actor.meshes.spawn_hooks import (register_proc_mesh_spawn_callback,
                                                  unregister_proc_mesh_spawn_callback)


def test_callbacks_see_each_new_mesh_in_order_until_unregistered():
    seen = []

    def first(pm):
        seen.append(("first", pm, pm.sizes))

    def second(pm):
        seen.append(("second", pm, pm.sizes))

    register_proc_mesh_spawn_callback(first)
    register_proc_mesh_spawn_callback(second)
    try:
        pm = this_host().spawn_procs(per_host={"procs": 2})
        try:
            assert [(tag, got is pm, sizes) for tag, got, sizes in seen] == [
                ("first", True, {"procs": 2}), ("second", True, {"procs": 2})]
        finally:
            pm.stop().get(30)
    finally:
        unregister_proc_mesh_spawn_callback(second)
        unregister_proc_mesh_spawn_callback(first)
    seen.clear()
    pm = this_host().spawn_procs(per_host={"procs": 1})
    pm.stop().get(30)
    assert seen == []


def test_bad_callbacks_are_refused():
    with pytest.raises(TypeError, match="callback must be callable"):
        register_proc_mesh_spawn_callback(42)
    with pytest.raises(ValueError, match="is not a registered proc mesh spawn callback"):
        unregister_proc_mesh_spawn_callback(print)


def test_a_failing_callback_fails_spawn_procs_and_the_mesh_is_still_a_child():
    def broken(pm):
        raise RuntimeError("callback broke")

    register_proc_mesh_spawn_callback(broken)
    try:
        with pytest.raises(RuntimeError, match="callback broke"):
            this_host().spawn_procs(per_host={"procs": 1})
    finally:
        unregister_proc_mesh_spawn_callback(broken)
    orphan = context().actor_instance._children[-1]
    assert isinstance(orphan, ProcMesh)
    orphan.stop().get(30)


def test_the_client_records_its_proc_meshes_and_drops_stopped_ones():
    inst = context().actor_instance
    inst._children = None
    pm = this_host().spawn_procs(per_host={"procs": 1})
    assert inst._children == [pm]
    pm.stop().get(30)
    pm2 = this_host().spawn_procs(per_host={"procs": 1})
    try:
        assert inst._children == [pm2]           # the stopped one is not kept
    finally:
        pm2.stop().get(30)
    inst._children = None                        # assignable, as Monarch's


class Spawner(Actor):
    @endpoint
    def spawn_and_count(self):
        inst = context().actor_instance
        pm = this_host().spawn_procs(per_host={"procs": 1})
        kids = [k is pm for k in (inst._children or [])]
        pm.stop().get(30)
        return kids


def test_an_actor_records_the_meshes_it_spawns():
    pm = this_host().spawn_procs(per_host={"procs": 1})
    try:
        assert pm.spawn("spawner", Spawner).spawn_and_count.call_one().get(60) == [True]
    finally:
        pm.stop().get(30)
