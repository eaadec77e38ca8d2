"""Proc meshes: start, env per rank, size, stop, death of workers."""

import time

import pytest

from _actors import Echo, ExitInInit
from _leakcheck import children
from monarch_cy.actor import (Actor, MeshStoppedError, ProcMesh, SupervisionError,
                              endpoint, this_host, this_proc)


def test_env_and_no_torch(echo):
    who = echo.whoami.call().get(10).values()
    assert [w[5] for w in who] == ["0", "1", "2", "3"]     # CUDA_VISIBLE_DEVICES per gpu
    assert not any(w[6] for w in who)                       # workers did not import torch


def test_sixteen_procs_and_stop():
    pm = this_host().spawn_procs(per_host={"hosts": 4, "gpus": 4}, env={"MY_VAR": "x"})
    assert isinstance(pm, ProcMesh) and pm.sizes == {"hosts": 4, "gpus": 4} and len(pm) == 16
    m = pm.spawn("e16", Echo)
    who = m.whoami.call().get(30)
    assert [w[1] for w in who.values()] == list(range(16))
    assert who.item(hosts=2, gpus=3)[2] == {"hosts": 2, "gpus": 3}
    sub = pm.slice(hosts=1)
    m2 = sub.spawn("e4", Echo)
    assert m2.whoami.call().get(10).sizes == {"gpus": 4}
    pids = {p.popen.pid for p in pm._procs}
    assert len(pids) == 16 and pids <= set(children())
    pm.stop().get(10)
    assert not (pids & set(children()))
    with pytest.raises(MeshStoppedError):
        m.ping.call(1)
    with pytest.raises(RuntimeError, match=r"^`ProcMesh` has already been stopped$"):
        pm.spawn("again", Echo)                 # Monarch's type and text
    pm.stop().get(1)     # idempotent


def test_pending_call_fails_when_stopped():
    pm = this_host().spawn_procs(per_host={"gpus": 1})
    m = pm.spawn("s", Echo)
    assert m.ping.call_one(1).get(10) == 1
    f = m.sleep.call_one(30)
    t = time.monotonic()
    pm.stop()
    with pytest.raises(SupervisionError):
        f.get(10)
    assert time.monotonic() - t < 5


def test_worker_exits_during_spawn():
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    m = pm.spawn("dies", ExitInInit)
    t = time.monotonic()
    with pytest.raises(SupervisionError, match="exited with non-zero code 7") as ei:
        m.ping.call(1).get(10)
    assert time.monotonic() - t < 2
    assert ei.value.actor == "dies"
    with pytest.raises(SupervisionError):       # later calls fail at once
        m.ping.call(1).get(1)
    pm.stop().get(10)


def test_worker_dies_mid_call(procs):
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    m = pm.spawn("mid", Echo)
    assert m.ping.call(1).get(10).values() == [1, 1]
    slow = m.slice(gpus=0).sleep.call_one(30)
    t = time.monotonic()
    with pytest.raises(SupervisionError, match="exited with non-zero code 3") as ei:
        m.slice(gpus=1).exit_now.call_one(3).get(10)
    assert time.monotonic() - t < 1.0 and ei.value.rank == 1
    with pytest.raises(SupervisionError, match="cannot spawn"):
        pm.spawn("mid2", Echo)
    other = pm.slice(gpus=0).spawn("mid3", Echo)   # proc 0 serves on (m's rank 0 sleeps)
    assert other.ping.call_one(2).get(10) == 2
    with pytest.raises(SupervisionError):
        m.slice(gpus=1).ping.call_one(2).get(10)
    pm.stop().get(10)
    with pytest.raises(SupervisionError):
        slow.get(10)


def test_context_managers():
    import asyncio

    async def main():
        async with this_host().spawn_procs(per_host={"gpus": 1}) as pm:
            m = pm.spawn("cm", Echo)
            return await m.ping.call_one(4), pm
    v, pm = asyncio.run(main())
    assert v == 4 and pm._state.stopped
    with this_host().spawn_procs(per_host={"gpus": 1}) as pm2:
        assert pm2.spawn("cm2", Echo).ping.call_one(5).get(10) == 5
    assert all(not p.alive for p in pm2._procs)


def test_bad_spawn_procs_input():
    with pytest.raises(ValueError, match="per_host"):
        this_host().spawn_procs(per_host={"gpus": 0})
    with pytest.raises(TypeError, match="env"):
        this_host().spawn_procs(per_host={"gpus": 1}, env={"A": 1})


def test_other_actor_sees_dead_proc(procs, name):
    """A worker's pending/later calls on a dead proc fail too (PROC_DEAD broadcast)."""
    pm = this_host().spawn_procs(per_host={"gpus": 1})
    target = pm.spawn("victim", Echo)
    caller = procs.slice(gpus=0).spawn(name, Echo)
    assert caller.hold.call_one(target).get(10) == 1
    assert caller.call_held.call_one(1).get(10) == 1
    with pytest.raises(SupervisionError):
        target.exit_now.call_one(9).get(10)
    t = time.monotonic()
    with pytest.raises(Exception) as ei:      # raised inside the caller's endpoint
        caller.call_held.call_one(1).get(10)
    assert time.monotonic() - t < 2
    assert "SupervisionError" in str(ei.value) and "code 9" in str(ei.value)
    pm.stop().get(10)


def test_message_larger_than_memory(echo, monkeypatch):
    import errno
    import numpy as np
    from monarch_cy._transport import shm

    def no_space(fd, off, n):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(shm.os, "posix_fallocate", no_space)
    monkeypatch.setattr(shm, "_POOL_KEEP_BYTES", 0)
    from monarch_cy._actor.base.state import get_node
    get_node().pool.trim(0)     # a free segment left by an earlier test would be reused
    big = np.zeros(200 << 20, dtype=np.uint8)   # needs a fresh segment (lazy pages)
    with pytest.raises(MemoryError, match="shared memory"):
        echo.slice(gpus=0).nbytes.call_one(big).get(10)
    monkeypatch.undo()
    assert echo.slice(gpus=0).ping.call_one(1).get(10) == 1


class _Spawner(Actor):
    @endpoint
    def spawn_on(self, procs):
        return procs.spawn("child", Echo)


def test_an_actor_mesh_knows_its_proc_mesh_and_that_its_host_mesh(name):
    """Monarch's ``ActorMesh._proc_mesh`` and ``ProcMesh._host_mesh``: where an actor
    mesh was spawned, and from which hosts (its ``region``), also for a mesh an
    actor spawned and returned."""
    hm = this_host()
    pm = hm.spawn_procs(per_host={"gpus": 2})
    try:
        m = pm.spawn(name, Echo)
        assert m._proc_mesh.sizes == {"gpus": 2}
        assert m._proc_mesh._host_mesh is hm is pm._host_mesh
        assert m._proc_mesh._host_mesh.region == hm.region
        child = pm.slice(gpus=0).spawn("spawner", _Spawner).spawn_on.call_one(
            pm.slice(gpus=slice(1, 2))).get(20)
        assert child._proc_mesh.sizes == {"gpus": 1}
        assert child._proc_mesh._host_mesh is hm          # the client spawned the procs
    finally:
        pm.stop().get(10)
    assert this_proc()._host_mesh is None
