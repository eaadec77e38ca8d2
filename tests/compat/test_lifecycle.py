"""Stopping, as Monarch's: every message sent before ``stop()`` is handled, then
``__cleanup__`` runs, then the actor instance is dropped (``__del__`` runs)."""

from __future__ import annotations

import time

import pytest

from _compat_actors import Lifecycle
from monarch_cy.actor import MeshStoppedError, this_host

pytestmark = pytest.mark.timeout(120)


def _events(path):
    return path.read_text().splitlines() if path.exists() else []


def test_stop_of_an_async_actor_cancels_its_endpoint_before_del(tmp_path):
    from _compat_actors import AsyncLifecycle
    pm = this_host().spawn_procs(per_host={"procs": 1})
    log = tmp_path / "async.log"
    m = pm.spawn("alife", AsyncLifecycle, str(log))
    pending = m.hang.call_one()
    deadline = time.monotonic() + 20
    while "hang" not in _events(log) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pm.stop().get(30) is None
    # as Monarch's: the running endpoint is cancelled and has ended before
    # __cleanup__, then the instance goes (its __del__)
    assert _events(log) == ["hang", "hang cancelled", "cleanup None", "del"]
    with pytest.raises(Exception):
        pending.get(10)


def test_proc_mesh_stop_runs_sent_messages_then_cleanup_then_del(tmp_path):
    pm = this_host().spawn_procs(per_host={"procs": 2})
    files = [tmp_path / f"rank{r}.log" for r in range(2)]
    meshes = [pm.slice(procs=r).spawn(f"life{r}", Lifecycle, str(files[r]))
              for r in range(2)]
    for m in meshes:
        for i in range(20):                 # fire and forget: nothing waited for
            m.work.broadcast(i)
    assert pm.stop().get(30) is None
    for f in files:
        assert _events(f) == [f"work {i}" for i in range(20)] + ["cleanup None", "del"]


def test_actor_mesh_stop_runs_sent_messages_then_cleanup_then_del(tmp_path):
    pm = this_host().spawn_procs(per_host={"procs": 1})
    try:
        log = tmp_path / "a.log"
        m = pm.spawn("life", Lifecycle, str(log))
        for i in range(10):
            m.work.broadcast(i)
        assert m.stop().get(30) == ()
        assert _events(log) == [f"work {i}" for i in range(10)] + ["cleanup None", "del"]
        with pytest.raises(MeshStoppedError):
            m.work.call(0).get(10)
        # the proc itself keeps serving
        other = tmp_path / "b.log"
        pm.spawn("life2", Lifecycle, str(other)).work.call(1).get(10)
        assert _events(other) == ["work 1"]
    finally:
        pm.stop().get(30)
