"""``context().actor_instance.stop()``, ``.kill()`` and ``.proc_mesh`` (Monarch's)."""

from __future__ import annotations

import os

import pytest

from _polling import wait_until
from monarch_cy.actor import MeshStoppedError, SupervisionError, context


def test_stop_is_graceful(procs, name, tmp_path, hook):
    from _actors import PlainMethods
    m = procs.slice(gpus=slice(0, 2)).spawn(name, PlainMethods, str(tmp_path))
    one = m.slice(gpus=0)
    assert one.stop_me.call_one("done").get(10) == "stopping"
    assert wait_until(lambda: os.path.exists(tmp_path / "cleanup0"))
    with pytest.raises(MeshStoppedError, match="stopped itself: done"):
        one.ping.call_one(1).get(10)
    assert m.slice(gpus=1).ping.call_one(2).get(10) == 2      # its peer serves on
    assert hook == []                                          # not a failure
    m.stop().get(10)


def test_kill_fails_without_cleanup(procs, name, tmp_path, hook):
    from _actors import PlainMethods
    m = procs.slice(gpus=slice(0, 2)).spawn(name, PlainMethods, str(tmp_path))
    one = m.slice(gpus=1)
    assert one.kill_me.call_one("bye").get(10) == "killed"
    assert wait_until(lambda: hook)
    assert hook[0].mesh_name.startswith(name + "-") and "actor killed: bye" in hook[0].cause
    with pytest.raises(SupervisionError, match="actor killed: bye"):
        one.ping.call_one(1).get(10)
    m.stop().get(10)
    assert os.path.exists(tmp_path / "cleanup0")               # the peer cleaned up
    assert not os.path.exists(tmp_path / "cleanup1")           # the killed one never


def test_client_cannot_stop_or_kill_itself():
    inst = context().actor_instance
    with pytest.raises(RuntimeError, match="client"):
        inst.stop()
    with pytest.raises(RuntimeError, match="client"):
        inst.kill()
    assert len(inst.proc_mesh) == 1


def test_proc_mesh_is_the_mesh_spawned_on(procs, name):
    from _actors import PlainMethods
    m = procs.slice(gpus=slice(1, 4)).spawn(name, PlainMethods)
    sizes, rank, n = m.slice(gpus=2).where.call_one().get(10)
    assert sizes == {"gpus": 3} and rank == {"gpus": 2} and n == 3
    pm = m.slice(gpus=0).proc_mesh.call_one().get(10)   # back in its owner: the same mesh
    assert pm._state is procs._state and pm._shape == procs.slice(gpus=slice(1, 4))._shape
    m.stop().get(10)


def test_proc_mesh_in_the_controller(name):
    from _actors import PlainMethods
    from monarch_cy.actor import this_proc
    m = this_proc().spawn(name, PlainMethods)
    sizes, rank, n = m.where.call_one().get(10)
    assert sizes == {} and n == 1
    m.stop().get(10)
