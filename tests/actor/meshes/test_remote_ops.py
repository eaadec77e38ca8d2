"""What a process asks a mesh's owner for (monarch_cy._actor.meshes.remote_ops), from
inside an async endpoint: the actor's event loop must not wait on itself
(``this_host().spawn_procs()``, ``context().actor_instance.proc_mesh``); and Futures
made of others resolve while a loop is blocked in ``get()`` (``HostMesh.shutdown``)."""

from __future__ import annotations

import asyncio
import time

from monarch_cy.actor import Actor, context, endpoint, this_host


class Leaf(Actor):
    @endpoint
    async def rank(self):
        return context().actor_instance.rank.rank


class Grower(Actor):
    @endpoint
    async def grow(self):
        procs = this_host().spawn_procs(per_host={"gpus": 2})   # blocks this loop briefly
        leaves = procs.spawn("leaves", Leaf)
        ranks = sorted(v for _, v in await leaves.rank.call())
        await procs.stop()
        return ranks

    @endpoint
    async def where(self):
        pm = context().actor_instance.proc_mesh    # asks its owner (the client)
        return dict(pm.sizes)


def test_spawn_procs_and_proc_mesh_inside_an_async_endpoint_return():
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        g = pm.spawn("grower", Grower)
        t = time.monotonic()
        assert g.slice(gpus=0).grow.call_one().get(60) == [0, 1]
        assert g.slice(gpus=1).where.call_one().get(30) == {"gpus": 2}
        assert time.monotonic() - t < 30
    finally:
        pm.stop().get(30)


def test_host_mesh_shutdown_waited_on_inside_a_running_loop():
    """``get()`` inside a loop blocks it (Monarch's warning); a Future made of others
    (the shutdown's, of every proc mesh's stop) must still resolve."""
    from monarch_cy._actor.meshes.host_mesh import HostMesh
    import warnings

    async def main():
        hm = HostMesh(this_host()._shape)
        hm.spawn_procs(per_host={"gpus": 1}).spawn("leaf", Leaf).rank.call().get(30)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return hm.shutdown().get(timeout=20)

    assert asyncio.run(main()) is None
