"""monarch.job.spmd on this host: serve(torchrun command).run_spmd(), StoreJob over a
store, and the refusals for what needs torchx's schedulers."""

from __future__ import annotations

import pytest

from _job_support import run_job
from monarch_cy.job.spmd import SPMDJob, StoreJob, serve
from monarch_cy._hosts.spmd_job import parse_torchrun


def test_serve_runs_the_script_in_each_rank(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import os, sys\n"
                      f"open(os.path.join({str(tmp_path)!r}, 'rank' + os.environ['RANK']),"
                      " 'w').write(os.environ['WORLD_SIZE'] + sys.argv[1])\n")
    res, _ = run_job("spmd_serve", {"script": str(script)}, cwd=str(tmp_path))
    assert res["workers"]
    assert sorted(p.name for p in tmp_path.glob("rank*")) == ["rank0", "rank1"]
    assert (tmp_path / "rank1").read_text() == "2x"


def test_store_job_attaches_to_the_published_worker():
    res, _ = run_job("store_job")
    assert len(res["procs"]) == 1 and res["keys"] == ["w/worker/0"], res


def test_parse_and_refusals(tmp_path, monkeypatch):
    r = [{"entrypoint": "torchrun", "args": ["--nproc_per_node=4", "-m", "train", "--lr", "1"]}]
    assert parse_torchrun(r) == (["-m", "train", "--lr", "1"], 4)
    assert parse_torchrun([{"entrypoint": "python", "args": ["t.py", "a"]}]) == (["t.py", "a"], 1)
    with pytest.raises(ValueError, match="Expected args"):
        parse_torchrun([{"entrypoint": "bash", "args": ["x"]}])
    with pytest.raises(ValueError, match="Multi-node"):
        serve(["torchrun", "--nnodes=2", "t.py"], scheduler="local_cwd")
    with pytest.raises(NotImplementedError, match="mast_conda"):
        serve(["torchrun", "t.py"])                   # Monarch's default scheduler
    with pytest.raises(NotImplementedError, match="AppDef|torchx"):
        serve(object(), scheduler="local_cwd")
    with pytest.raises(ValueError, match="monarch_port"):
        StoreJob.from_store({}, transport="tcp", rank=0, local_rank=0, world_size=1,
                            local_world_size=1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".monarch").mkdir()
    (tmp_path / ".monarch" / "job_state.pkl").write_text("stale")
    with pytest.warns(UserWarning, match="stale"):
        job = serve(["torchrun", "t.py"], scheduler="local_cwd")
    assert isinstance(job, SPMDJob) and not (tmp_path / ".monarch" / "job_state.pkl").exists()


def test_a_job_of_another_scheduler_is_made_but_its_state_is_refused():
    """As Monarch's cache makes one: run_spmd drives the workers the job's state
    gives (spawn_procs per node, _SPMDActor, the first rank's address), and reaching a
    non-local scheduler's workers is what monarch_cy refuses."""
    from unittest.mock import MagicMock, patch
    from monarch_cy.spmd import SPMDActor
    job = SPMDJob(handle="h", scheduler="mast_conda", original_roles=[
        {"entrypoint": "torchrun", "args": ["--nproc-per-node=3", "-m", "train", "-x"]}])
    with pytest.raises(NotImplementedError, match="scheduler 'mast_conda'"):
        job.state(cached_path=None)
    workers = MagicMock()
    procs = workers.spawn_procs.return_value
    am = procs.spawn.return_value
    am.slice.return_value.get_host_port.call_one.return_value.get.return_value = ("h1", 7)
    with patch.object(job, "_state", return_value=MagicMock(workers=workers)):
        job.run_spmd()
    workers.spawn_procs.assert_called_once_with(per_host={"gpus": 3})
    procs.spawn.assert_called_once_with("_SPMDActor", SPMDActor)
    am.main.call.assert_called_once_with("h1", 7, ["-m", "train", "-x"])
    with pytest.raises(TypeError, match="scheduler must be a str"):
        SPMDJob(handle="h", scheduler=None)

