"""Sharing hosts and procs, and workers started the way Monarch's programs start them.

Each scenario is a controller process (tests/hosts/_job_scenarios.py) with ``HOME``
pointing at a folder of the test's own, so the user's secret (what workers started
with nothing but an address and a controller share) is the test's.
"""

from __future__ import annotations

import os
import stat

import pytest

from _job_support import run_job, wait_gone


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return str(h)


def test_process_job_after_local_procs(home):
    res, _ = run_job("after_local_procs", HOME=home)
    assert res == {"local": True, "remote": True}


def test_stopping_one_host_mesh_leaves_another_over_the_same_workers(home):
    res, _ = run_job("stop_own_only", HOME=home)
    assert res["left1"] == [], res                 # the stopped mesh's procs are gone
    assert res["alive2"] == res["p2"], res         # the other mesh's procs were not
    assert wait_gone(res["agents"], 10) == []      # shutdown ended the workers
    assert wait_gone(res["p2"], 10) == []


def test_host_meshes_outside_the_object_the_program_made(home):
    res, _ = run_job("host_refs", HOME=home)
    assert res["this_host"] and res["sliced"], res
    assert res["ref_equal"] is True
    assert "cannot shut down `HostMesh` that is a reference instead of owned" in \
        res["refused"]
    assert res["same_host_spawn"] is True          # spawned beside its parent proc
    assert res["region"] == [[], 2, 1]
    assert (res["fake"], res["stream_logs"]) == (False, False)
    assert res["inner_none"] is False and res["inner_none_after"] is True


def test_workers_started_with_only_an_address(home):
    res, _ = run_job("workers_without_secret", HOME=home)
    assert res["procs"] == 6 and res["codes"] == [0, 0, 0], res
    assert "HostRefusedError" in res["refused"] and "different job secret" in \
        res["refused"], res
    secret = os.path.join(home, ".monarch_cy", "user.secret")
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600


def test_login_job_of_the_programs_own(home):
    res, _ = run_job("login_job", HOME=home)
    assert res["procs"] == 2 and res["active"] is False
    assert wait_gone(res["workers"], 10) == []


def test_attach_keeps_monarchs_contract(home, tmp_path):
    addr = f"ipc://{tmp_path}/gw"
    res, _ = run_job("attach_contract", {"addr": addr}, HOME=home)
    assert "already attached through" in res["other"]
    res, _ = run_job("attach_after_start", {"addr": addr}, HOME=home)
    assert "initialized without a remote attachment" in res["late"]
    res, _ = run_job("attach_then_remove", HOME=home)
    assert res == {"procs": 2, "code": 0}


def test_with_python_executable_is_inherited_by_spawned_procs(home, tmp_path):
    import sys
    wrapper = tmp_path / "py"
    wrapper.write_text(f'#!/bin/sh\nexport WRAPPED_BY=$$\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    res, _ = run_job("python_executable", {"wrapper": str(wrapper)}, HOME=home)
    assert res["outer"] and res["inner"] and res["outer"] != res["inner"], res
    assert res["plain"] == "" and res["equal"] is False and res["again"] is True


def test_killing_a_job_with_live_procs_is_not_a_failure(home):
    res, _ = run_job("kill_is_not_a_failure", HOME=home)
    assert res == {"hooked": [], "left": []}
