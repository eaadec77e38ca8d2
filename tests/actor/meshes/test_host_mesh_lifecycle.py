"""``HostMesh.stop()``, ``shutdown()``, ``initialized`` and ``this_host()`` (Monarch's)."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from monarch_cy.actor import HostMesh, MeshStoppedError, this_host
from monarch_cy._actor.base.shape import Shape


def test_this_host_is_one_owned_mesh():
    assert this_host() is this_host()
    assert this_host().initialized.get(5) is True
    ref = pickle.loads(pickle.dumps(this_host()))
    with pytest.raises(RuntimeError, match="reference"):
        ref.stop()
    with pytest.raises(RuntimeError, match="reference"):
        ref.shutdown()


def test_stop_then_shutdown(name):
    from _actors import Echo
    hm = HostMesh(Shape.dense((), ()))          # owned, like the one a program makes
    pm = hm.spawn_procs(per_host={"gpus": 1})
    m = pm.spawn(name, Echo, "x")
    assert m.ping.call_one(1).get(10) == 1
    assert hm.stop().get(30) is None            # its proc meshes stop; the hosts stay
    with pytest.raises(MeshStoppedError):
        m.ping.call_one(1)
    pm2 = hm.spawn_procs(per_host={"gpus": 1})
    assert pm2.spawn(name, Echo, "y").ping.call_one(2).get(10) == 2
    fut = hm.shutdown()
    assert fut.get(30) is None and pm2._state.stopped
    for what in (lambda: hm.spawn_procs(per_host={"gpus": 1}), lambda: hm.initialized,
                 hm.shutdown, hm.stop):
        with pytest.raises(RuntimeError, match="already been shut down"):
            what()
    assert HostMesh(Shape.dense((), ())).stop().get(5) is None     # nothing to stop


def test_async_context_manager_shuts_down():
    hm = HostMesh(Shape.dense((), ()))

    async def main():
        async with hm as h:
            assert h is hm
    asyncio.run(main())
    with pytest.raises(RuntimeError, match="already been shut down"):
        hm.initialized
