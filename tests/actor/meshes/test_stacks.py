"""Stacks on demand (issue 36, item 4): ``ProcMesh.dump_stacks()`` and ``monarch-cy
stacks`` read every thread of every proc with py-spy, by rank, while the procs spin
in Python, sleep in C or hold the GIL in C; nothing is killed, the mesh then stops
as usual."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from monarch_cy.actor import this_host
from monarch_cy.errors import StackDumpError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

SPIN, GIL, SLEEP = "Stuck.spin_forever", "Stuck.hold_gil_in_c", "Stuck.sleep_in_c"


@pytest.fixture
def stuck():
    """3 procs: rank 0 spins in Python, rank 1 holds the GIL in C (8 s), rank 2 sleeps
    in C; the calls are left running.  Yields (proc mesh, the calls' futures)."""
    from _stuck_actors import Stuck
    # a name of its own: other tests of the session may hold meshes named "procs"
    pm = this_host().spawn_procs(per_host={"gpus": 3}, name="stuckprocs")
    m = pm.spawn("stuck", Stuck)
    calls = [m.slice(gpus=0).spin_forever.call(), m.slice(gpus=1).hold_gil_in_c.call(8.0),
             m.slice(gpus=2).sleep_in_c.call(60.0)]
    yield pm, calls
    pm.stop().get(30)                 # a normal stop: the stuck endpoints are ended by it


def _until_all_stuck(pm, want=(SPIN, GIL, SLEEP), limit=20.0):
    deadline = time.monotonic() + limit
    while True:
        stacks = pm.dump_stacks().get(30)
        if all(w in s.functions() for w, s in zip(want, stacks.values())):
            return stacks
        if time.monotonic() > deadline:
            return stacks
        time.sleep(0.2)


def test_dump_stacks_shows_each_ranks_stuck_endpoint(stuck):
    pm, calls = stuck
    stacks = _until_all_stuck(pm)
    values = stacks.values()
    assert [s.rank for s in values] == [0, 1, 2]
    for want, s in zip((SPIN, GIL, SLEEP), values):
        assert s.error is None, s
        assert want in s.functions(), str(s)
        others = {SPIN, GIL, SLEEP} - {want}
        assert not (others & s.functions()), str(s)      # each rank its own endpoint
        assert s.pid and s.pid != os.getpid()
    gil = next(t for t in values[1].threads if any(f.name == GIL for f in t.frames))
    assert gil.owns_gil                               # read although it holds the GIL
    assert gil.frames[0].name == GIL and gil.frames[0].filename.endswith("_stuck_actors.py")
    assert stacks.item(gpus=1) is values[1]
    text = str(values[0])
    assert text.startswith("--- stuckprocs rank 0 (pid ") and SPIN in text
    # nothing was killed or interrupted: the calls are still running
    assert not any(c.done() for c in calls)
    # a slice keeps each proc's rank in its proc mesh
    (one,) = pm.slice(gpus=2).dump_stacks().get(30).values()
    assert one.rank == 2 and SLEEP in one.functions()


def test_dump_stacks_of_this_proc_reads_the_controller_in_process():
    from monarch_cy.actor import this_proc
    (me,) = this_proc().dump_stacks().get(30).values()
    assert me.pid == os.getpid() and me.error is None
    assert "test_dump_stacks_of_this_proc_reads_the_controller_in_process" in me.functions()


def _cli(*args, env=None, timeout=90):
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in e.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    return subprocess.run([sys.executable, "-m", "monarch_cy", "stacks", *args],
                          capture_output=True, text=True, timeout=timeout, env=e)


def test_stacks_command_from_a_second_process_prints_them_by_rank(stuck):
    from monarch_cy._actor.base import state
    pm, calls = stuck
    _until_all_stuck(pm)
    rundir = state.get_node().rundir
    r = _cli("--job", rundir)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert f"controller pid {os.getpid()}" in out
    for rank, want in enumerate((SPIN, GIL, SLEEP)):
        head = f"--- stuckprocs rank {rank} (pid "
        assert head in out, out
        block = out.split(head, 1)[1].split("\n--- ", 1)[0]
        assert want in block, block
    assert "--- controller rank 0" in out
    # by the controller's pid, one rank, as JSON
    r = _cli("--job", str(os.getpid()), "--mesh", "stuckprocs", "--rank", "1", "--json")
    assert r.returncode == 0, r.stderr
    (doc,) = json.loads(r.stdout)
    assert doc["rank"] == 1 and doc["label"] == "stuckprocs"
    assert any(f["name"] == GIL for t in doc["threads"] for f in t["frames"])
    # an unknown rank names the ranks that exist
    r = _cli("--job", rundir, "--mesh", "stuckprocs", "--rank", "7")
    assert r.returncode == 2 and r.stdout == ""
    assert "--rank 7: no such rank" in r.stderr and "'stuckprocs': 0-2" in r.stderr, r.stderr
    r = _cli("--job", rundir, "--mesh", "nope")
    assert r.returncode == 2 and "'stuckprocs'" in r.stderr, r.stderr
    assert not any(c.done() for c in calls)          # still running: nothing killed


def test_stacks_command_without_a_running_job_says_so(tmp_path):
    env = dict(os.environ, MONARCH_CY_RUN_DIR=str(tmp_path))
    r = _cli(env=env)
    assert r.returncode == 3 and r.stdout == ""
    assert "no running monarch_cy job found" in r.stderr and str(tmp_path) in r.stderr
    r = _cli("--job", str(tmp_path / "mcy-gone"), env=env)
    assert r.returncode == 2 and "cannot read the job file" in r.stderr, r.stderr


def _fake_pyspy(tmp_path, stderr: str) -> str:
    exe = tmp_path / "py-spy"
    exe.write_text(f"#!/bin/sh\necho '{stderr}' >&2\nexit 1\n")
    exe.chmod(0o755)
    return str(exe)


def test_refused_by_ptrace_names_what_to_change(tmp_path, monkeypatch):
    from monarch_cy import _stacks
    monkeypatch.setenv("PYSPY_BIN", _fake_pyspy(
        tmp_path, "Error: Permission Denied: Try running again with elevated permissions"))
    with pytest.raises(StackDumpError) as e:
        _stacks.dump(os.getpid())
    msg = str(e.value)
    assert f"process {os.getpid()}" in msg and "ptrace_scope" in msg
    assert "CAP_SYS_PTRACE" in msg and "SYS_PTRACE" in msg


def test_pyspy_missing_or_failing(tmp_path, monkeypatch):
    from monarch_cy import _stacks
    monkeypatch.setenv("PYSPY_BIN", str(tmp_path / "nowhere"))
    with pytest.raises(StackDumpError, match="PYSPY_BIN=.*nowhere.* is not an executable"):
        _stacks.dump(os.getpid())
    monkeypatch.setenv("PYSPY_BIN", _fake_pyspy(tmp_path, "Error: something odd"))
    s = _stacks.dump(os.getpid(), rank=3)
    assert s.rank == 3 and s.error == "py-spy failed: something odd" and s.threads == ()
    monkeypatch.delenv("PYSPY_BIN")
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    gone = _stacks.dump(p.pid)
    assert gone.error == "the process has exited"


def test_bad_timeout_names_the_parameter():
    from monarch_cy.actor import this_proc
    with pytest.raises(ValueError, match="timeout"):
        this_proc().dump_stacks(timeout=-1)


def test_dump_stacks_from_an_actor_asks_the_owner(stuck):
    """A proc mesh sent to an actor is a remote view: its dump_stacks is answered by
    the mesh's owner, which reads the asking actor's own proc too."""
    from _stuck_actors import Asker
    pm, _ = stuck
    asker = pm.slice(gpus=2).spawn("asker", Asker)
    got = asker.stacks_of.call_one(pm).get(60)
    assert [r for r, _, _ in got] == [0, 1, 2]
    assert all(err is None for _, err, _ in got), got
    assert got[2][2] and not got[0][2]          # the asker is seen waiting, on rank 2
