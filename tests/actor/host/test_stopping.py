"""A proc stopped on purpose ends as a Python program does (Monarch's procs do):
its ``atexit`` handlers run and its interpreter finalizes, module globals included."""

from __future__ import annotations

import os
import time

import pytest

from _actors import Finalizable
from monarch_cy.actor import Actor, endpoint, this_host


@pytest.mark.parametrize("start", ["fork", "exec"])
def test_stopped_proc_runs_atexit_and_finalizes_module_globals(tmp_path, monkeypatch,
                                                               start):
    if start == "exec":
        monkeypatch.setenv("MONARCH_CY_START", "exec")
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    pids = sorted(pm.spawn("fin", Finalizable, str(tmp_path)).pid.call().get(30).values())
    t = time.monotonic()
    pm.stop().get(20)
    took = time.monotonic() - t
    want = sorted([f"atexit.{p}" for p in pids] + [f"del.{p}" for p in pids])
    assert sorted(os.listdir(tmp_path)) == want
    assert took < 5, f"stop took {took:.2f} s"


def test_stopping_an_actor_stops_the_meshes_it_spawned_first(tmp_path):
    """As Monarch's: an actor's descendants (children in its proc or on other procs,
    grandchildren) stop, their ``__cleanup__`` running, before its own does; calls
    to them then fail at once instead of reaching a live actor."""
    from _actors import MarkerOwner
    from monarch_cy.actor import MeshStoppedError
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    other = this_host().spawn_procs(per_host={"gpus": 1})
    parent = pm.spawn("parent", MarkerOwner, str(tmp_path), "parent")
    near = parent.slice(gpus=0).spawn_child.call_one("near", None, True).get(30)
    far = parent.slice(gpus=0).spawn_child.call_one("far", other).get(30)
    assert near.ok.call_one().get(10) == "near" and far.ok.call().get(10).item(gpus=0) == "far"
    parent.stop().get(30)
    names = sorted(os.listdir(tmp_path))
    assert names == ["far.cleanup", "near.cleanup", "near_grand.cleanup",
                     "parent.cleanup"], names
    # descendants first: the parent's cleanup is the last written
    mtimes = {n: os.stat(tmp_path / n).st_mtime_ns for n in names}
    assert max(mtimes, key=mtimes.get) == "parent.cleanup", mtimes
    with pytest.raises(MeshStoppedError):
        near.ok.call_one().get(10)
    with pytest.raises(MeshStoppedError):
        far.ok.call().get(10)
    pm.stop().get(20)
    other.stop().get(20)


class _Finalized:
    """Writes "finalized" through a file it opened early (builtins such as ``open``
    may be gone when the interpreter finalizes)."""

    def __init__(self, path):
        self.file = open(path, "w")

    def __del__(self):
        self.file.write("finalized")
        self.file.close()


_sentinel = None                # set in the proc by GlobalHolder: a global of its module


class GlobalHolder(Actor):
    """Puts a finalizer in a global of *its own module*: the module its endpoints'
    functions are globals of, so an actor thread holding those functions after the
    stop would keep the global alive past finalization."""

    def __init__(self, path):
        global _sentinel
        _sentinel = _Finalized(path)

    @endpoint
    def pid(self):
        return os.getpid()


@pytest.mark.parametrize("method", ["pid", "apid"])
def test_a_global_of_the_actors_own_module_is_finalized_on_stop(tmp_path, method):
    path = tmp_path / "marker"
    path.write_text("not finalized")
    pm = this_host().spawn_procs(per_host={"gpus": 1})
    holder = pm.spawn("holder", GlobalHolder, str(path)) if method == "pid" else \
        pm.spawn("aholder", AsyncGlobalHolder, str(path))
    getattr(holder, method).call_one().get(30)
    pm.stop().get(20)
    assert path.read_text() == "finalized"


class AsyncGlobalHolder(Actor):
    def __init__(self, path):
        global _sentinel
        _sentinel = _Finalized(path)

    @endpoint
    async def apid(self):
        return os.getpid()
