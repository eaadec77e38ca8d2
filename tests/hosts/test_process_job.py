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


def test_remote_procs_output_is_captured_at_the_fd_level():
    """A host agent reads its procs' fds 1 and 2 and sends the bytes to the
    controller: Python prints, raw fd writes and a child process's output are
    printed with the rank, a killed proc's last lines (one without a newline) are in
    its failure and the hook's report, and the controller keeps a log file per proc."""
    res, r = run_job("remote_output")
    out, err = r.stdout, r.stderr
    for rank in (0, 1):
        assert f"[rw] [{rank}] py-x" in out, out
        assert f"[proc] [{rank}] fd-out-x" in out, out
        assert f"[proc] [{rank}] child-x" in out, out
        assert f"[proc] [{rank}] fd-err-x" in err, err
    failure = res["failure"]
    assert failure is not None and "Killed(sig=9)" in failure, res
    tail = failure[failure.index("the last "):]
    assert "[proc 1] famous last words" in tail and "[proc 1] no newline at the end" in tail
    assert res["hook"] and "[proc 1] famous last words" in res["hook"][0], res
    assert "[proc 0] fd-out-x\n" in res["logs"]["0"], res["logs"]
    assert "[proc 1] no newline at the end" in res["logs"]["1"], res["logs"]


def test_dump_stacks_reads_procs_on_a_host_agent():
    """ProcMesh.dump_stacks() of procs a host agent started: the agent runs py-spy
    on its host and answers, by rank; the procs keep running."""
    res, _ = run_job("remote_stacks", timeout=180)
    stacks = res["stacks"]
    assert [s["rank"] for s in stacks] == [0, 1], res
    assert all(s["error"] is None and s["napping"] for s in stacks), res
    assert sorted(s["pid"] for s in stacks) == sorted(res["pids"]), res
    assert {s["label"] for s in stacks} == {"napping"} and res["running"], res
