"""ProcessJob, LocalJob and hosts_from_config: hosts as processes on this machine.

Each scenario is a controller process; its hosts are host agents on loopback that
the job starts.  Checked: the meshes and their procs, ``kill()`` and the context
manager, the agents ending with an owning controller (normal exit and crash),
malformed specifications refused before anything starts.
"""

from __future__ import annotations

import os

import pytest

from _job_support import run_job, wait_gone
from monarch_cy.job import JobTrait, LocalJob, ProcessJob


def test_process_job_meshes_procs_and_kill():
    res, _ = run_job("process_job")
    assert res["sizes"] == [{"hosts": 2}, {"hosts": 1}], res
    assert len(res["trainers"]) == 4 and len(res["dataloaders"]) == 1, res
    agents = res["agents"]
    assert len(set(agents)) == 3
    # every proc is a child of its host's worker process, with the job's env
    assert {p["flag"] for p in res["trainers"] + res["dataloaders"]} == {"yes"}
    assert res["active"] is True and res["after"] is False
    assert "nope" in res["missing"] and "trainers" in res["missing"], res
    assert wait_gone(agents, 5) == []


@pytest.mark.parametrize("crash", [False, True])
def test_owned_agents_end_with_the_controller(crash):
    res, r = run_job("owned_exit", {"crash": crash}, check=not crash)
    assert res is not None, r.stderr[-3000:]
    if crash:
        assert r.returncode == 3
    pids = res["agents"] + [p["pid"] for p in res["procs"]]
    assert wait_gone(pids, 10) == [], pids


@pytest.mark.parametrize("meshes,exc,text", [
    ({"hosts": -1}, ValueError, "-1"),
    ({"hosts": 0}, ValueError, "0"),
    ({"hosts": "x"}, TypeError, "'x'"),
    ({"hosts": 1.5}, TypeError, "1.5"),
    ({"hosts": True}, TypeError, "True"),
    ({1: 2}, TypeError, "1"),
    ({"not a name": 1}, ValueError, "not a name"),
    ({"_hosts": 1}, ValueError, "_hosts"),
    ({}, ValueError, "empty"),
    ([("hosts", 1)], TypeError, "hosts"),
    ("hosts", TypeError, "hosts"),
])
def test_malformed_specs_are_refused(meshes, exc, text):
    with pytest.raises(exc, match=None) as ei:
        ProcessJob(meshes)
    assert text in str(ei.value)


def test_bad_env_and_unknown_keywords():
    with pytest.raises(TypeError, match="env"):
        ProcessJob({"hosts": 1}, env={"A": 1})
    with pytest.raises(TypeError):
        ProcessJob({"hosts": 1}, gpus=2)
    with pytest.raises(RuntimeError, match="batch-mode"):
        ProcessJob({"hosts": 1}).apply(client_script="x.py")


def test_local_job_is_this_host(tmp_path):
    res, _ = run_job("local_job", {"path": str(tmp_path / "c" / "job.pkl")})
    assert len(res["procs"]) == 1 and res["cached"], res
    for bad, exc in [("hosts", TypeError), ((), ValueError), (("a b",), ValueError)]:
        with pytest.raises(exc):
            LocalJob(bad)


def test_local_job_batch_client(tmp_path):
    out = tmp_path / "out.txt"
    script = tmp_path / "client.py"
    script.write_text(
        "import os\n"
        "from monarch_cy.job import LocalJob\n"
        "st = LocalJob().state()\n"
        f"open({str(out)!r}, 'w').write(str(st.hosts.sizes) + os.environ['MONARCH_BATCH_JOB'])\n")
    res, _ = run_job("batch_client", {"script": str(script), "out": str(out)},
                     cwd=str(tmp_path))
    assert res["code"] == 0 and res["out"] == "{}1", res
    assert (tmp_path / ".monarch" / "job_state.pkl").exists()


def test_hosts_from_config():
    res, _ = run_job("hosts_from_config")
    assert res["sizes"] == {"hosts": 2} and len(res["procs"]) == 2, res
    assert wait_gone(res["agents"], 10) == []


def test_job_trait_surface():
    job = ProcessJob({"hosts": 1})
    assert isinstance(job, JobTrait) and job.active is False
    assert job.can_run(ProcessJob({"hosts": 1})) is False     # not running
    job.kill()                                                # idempotent, nothing ran
    assert job.active is False
