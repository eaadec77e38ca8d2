"""The controller's node (monarch_cy._actor.wiring, .base.state): one per process, a private
run directory with a reaper, addresses inside it, and the job's secret."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from monarch_cy._actor.base import addresses, state
from monarch_cy._actor.launch.rundir import reaper_pids


def test_get_node_is_one_node_per_process(echo):
    a = state.get_node()
    assert state.get_node() is a and a.is_controller


def test_the_run_directory_is_private_and_has_a_reaper(echo):
    node = state.get_node()
    mode = stat.S_IMODE(os.stat(node.rundir).st_mode)
    assert mode == 0o700, oct(mode)
    pids = reaper_pids()
    assert pids, "no reaper for the run directory"
    with open(f"/proc/{pids[0]}/cmdline", "rb") as f:
        assert node.rundir.encode() in f.read()


def test_addresses_live_in_the_run_directory(echo):
    node = state.get_node()
    if addresses.transport() == "tcp":
        assert addresses.alloc_addr(node, "x").startswith("tcp://127.0.0.1:")
    else:
        a, b = addresses.alloc_addr(node, "t1"), addresses.alloc_addr(node, "t2")
        assert a != b and a.split("://", 1)[1].startswith(node.rundir + "/")


def test_next_id_is_unique_across_threads():
    import threading
    got = []
    ts = [threading.Thread(target=lambda: got.extend(state.next_id()
                                                      for _ in range(500)))
          for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(set(got)) == 2000


def test_the_run_directory_is_removed_at_a_normal_exit():
    code = ("from monarch_cy._actor.base.state import get_node\n"
            "print(get_node().rundir, flush=True)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    rundir = out.stdout.strip()
    assert rundir and not os.path.exists(rundir), out.stderr


def test_the_run_directory_goes_where_it_is_cheap_unless_told(tmp_path, monkeypatch):
    from monarch_cy._actor.launch import rundir
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.delenv("MONARCH_CY_RUN_DIR", raising=False)
    on_tmpfs = rundir._writable_tmpfs("/dev/shm")
    assert rundir.base_dir() == ("/dev/shm" if on_tmpfs else None)
    monkeypatch.setenv("TMPDIR", str(tmp_path))          # the user's choice wins
    assert rundir.base_dir() is None
    monkeypatch.setenv("MONARCH_CY_RUN_DIR", str(tmp_path / "runs"))
    assert rundir.base_dir() == str(tmp_path / "runs")
    assert not rundir._writable_tmpfs(str(tmp_path / "nowhere"))
    # a controller started with MONARCH_CY_RUN_DIR makes its directory there
    (tmp_path / "runs").mkdir()
    code = ("from monarch_cy._actor.base.state import get_node\n"
            "print(get_node().rundir, flush=True)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ))
    assert out.stdout.strip().startswith(str(tmp_path / "runs") + "/mcy-"), out.stderr
