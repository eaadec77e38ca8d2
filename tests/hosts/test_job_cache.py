"""The job cache: ``state(cached_path=...)``, ``dump``/``dumps``, ``job_load``/``job_loads``.

Two controller processes in sequence: the first applies a ProcessJob and caches it;
its agents outlive it; the second re-attaches to them (same pids), a third with
another spec replaces the job, and ``job_load(path).kill()`` ends it.  A cache is
JSON read only from a file this user owns and others cannot write; a missing,
corrupt or foreign cache is an error naming the path.
"""

from __future__ import annotations

import json
import os
import pickle

import pytest

from _job_support import run_job, wait_gone
from monarch_cy.job import (DEFAULT_JOB_PATH, LocalJob, ProcessJob, job_load,
                            job_loads)


def test_second_controller_reattaches_then_kills(tmp_path):
    path = str(tmp_path / ".monarch" / "job_state.pkl")
    first, _ = run_job("cached_first", {"path": path})
    assert first["mode"] == "0o600"
    agents = first["agents"]
    # the first controller is gone; its procs went with it, its agents did not
    assert wait_gone([p["pid"] for p in first["procs"]], 10) == []
    assert wait_gone(agents, 0.5) == agents
    second, _ = run_job("cached_again", {"path": path})
    assert second["agents"] == agents and second["loaded"] is True, second
    assert len(second["procs"]) == 2, second
    # another spec: the cached job cannot run it, so it is ended and replaced
    third, _ = run_job("cached_again", {"path": path, "meshes": {"solo": 1}})
    assert wait_gone(agents, 10) == []
    assert len(third["agents"]) == 1 and third["agents"][0] not in agents
    last, _ = run_job("kill_loaded", {"path": path})
    assert last["agents"] == third["agents"] and last["active"] is False
    assert wait_gone(last["agents"], 10) == []


def test_job_load_errors_name_the_path(tmp_path):
    missing = str(tmp_path / "nope.pkl")
    with pytest.raises(FileNotFoundError, match="nope.pkl"):
        job_load(missing)
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(pickle.dumps({"x": 1}))
    os.chmod(bad, 0o600)
    with pytest.raises(ValueError, match="bad.pkl"):
        job_load(str(bad))
    lax = tmp_path / "lax.pkl"
    lax.write_bytes(LocalJob().dumps())
    os.chmod(lax, 0o666)
    with pytest.raises(PermissionError, match="lax.pkl"):
        job_load(str(lax))
    os.chmod(lax, 0o600)
    assert isinstance(job_load(str(lax)), LocalJob)
    unknown = json.dumps({"format": "monarch_cy.job/1", "type": "os.system",
                          "state": {}}).encode()
    with pytest.raises(ValueError, match="unknown job type"):
        job_loads(unknown)
    with pytest.raises(ValueError, match="not a monarch_cy job cache"):
        job_loads(pickle.dumps(LocalJob))
    slurm = json.dumps({"format": "monarch_cy.SlurmJob/1"}).encode()
    with pytest.raises(ValueError, match="SlurmJob"):
        job_loads(slurm)
    with pytest.raises(TypeError):
        job_loads(42)


def test_dumps_round_trip_and_pickle():
    assert DEFAULT_JOB_PATH == ".monarch/job_state.pkl"
    spec = ProcessJob({"a": 2, "b": 1}, env={"K": "v"})
    back = job_loads(spec.dumps())
    assert isinstance(back, ProcessJob) and back._meshes == {"a": 2, "b": 1}
    assert back._env == {"K": "v"} and back.active is False
    again = pickle.loads(pickle.dumps(spec))       # pickles as the JSON document
    assert isinstance(again, ProcessJob) and again._meshes == spec._meshes
    lj = job_loads(LocalJob(("x", "y")).dumps())
    assert lj._host_names == ("x", "y") and lj.active is True


def test_dump_follows_symlink_and_is_private(tmp_path):
    target = tmp_path / "ctx" / "state.pkl"
    target.parent.mkdir()
    link = tmp_path / "job_state.pkl"
    link.symlink_to(target)
    LocalJob().dump(str(link))
    assert link.is_symlink() and target.exists()
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    assert isinstance(job_load(str(link)), LocalJob)


# -- job types of the program's own: pickled, signed with the user's secret ----------

@pytest.fixture
def user_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def test_a_custom_job_type_caches_and_reattaches(tmp_path, user_home):
    from _custom_jobs import RecordingJob
    path = str(tmp_path / "job.pkl")
    first = RecordingJob(hosts=("trainers", "evals"))
    first.apply()
    assert first.apply_id is not None
    first.dump(path)
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    doc = json.loads(open(path).read())
    assert doc["format"] == "monarch_cy.job/1"
    assert doc["pickled"]["class"] == "_custom_jobs.RecordingJob"
    # a later spec that the cached job can run re-attaches to it: no _create
    spec = RecordingJob()
    st = spec.state(cached_path=path)
    assert spec.created is False and sorted(st) == ["evals", "trainers"]
    assert spec.apply_id == first.apply_id              # the running allocation's
    # Monarch's service attributes: None without telemetry or admin
    assert (st.query_engine, st.query_engine_client, st.telemetry_url,
            st.dashboard_url, st.admin_url) == (None,) * 5
    with pytest.raises(AttributeError, match="'workers' is not a valid host mesh name. "
                                             "Available names: evals, trainers"):
        st.workers
    back = job_loads(first.dumps())
    assert isinstance(back, RecordingJob) and back.hosts == ("trainers", "evals")
    assert back.active is True
    back.kill()
    assert back.killed is True and back.active is False


def test_a_cached_job_that_cannot_run_the_spec_is_replaced(tmp_path, user_home):
    from _custom_jobs import RecordingJob
    path = str(tmp_path / "job.pkl")
    cached = RecordingJob(compatible=[])          # runs nothing
    cached.apply()
    cached.dump(path)
    spec = RecordingJob(hosts=("workers",))
    st = spec.state(cached_path=path)
    assert spec.created is True and list(st) == ["workers"]
    assert job_load(path).hosts == ("workers",)   # the new job was cached in its place


def test_a_tampered_pickled_cache_is_refused_before_unpickling(tmp_path, user_home):
    """A signature that does not hold means no unpickling at all (the trap's file is
    never made), and the error names the path."""
    import base64
    from _custom_jobs import RecordingJob, Trap
    path = tmp_path / "job.pkl"
    RecordingJob().dump(str(path))
    doc = json.loads(path.read_text())
    bait = str(tmp_path / "ran")
    doc["pickled"]["data"] = base64.b64encode(pickle.dumps(Trap(bait))).decode()
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"{path}.*integrity check"):
        job_load(str(path))
    with pytest.raises(ValueError, match="integrity check"):
        job_loads(path.read_bytes())
    assert not os.path.exists(bait)


def test_another_users_pickled_cache_is_refused(tmp_path, user_home, monkeypatch):
    """Written under one user's secret, read under another's (another home): the
    signature does not hold."""
    from _custom_jobs import RecordingJob
    path = str(tmp_path / "job.pkl")
    RecordingJob().dump(path)
    other = tmp_path / "other-home"
    other.mkdir()
    monkeypatch.setenv("HOME", str(other))
    with pytest.raises(ValueError, match="another user"):
        job_load(path)
    os.chmod(path, 0o644)
    os.chmod(path, 0o622)
    with pytest.raises(PermissionError, match="writable by group or others"):
        job_load(path)


def test_a_custom_job_that_does_not_pickle_says_why(user_home):
    import threading
    from _custom_jobs import RecordingJob
    job = RecordingJob()
    job.lock = threading.Lock()
    with pytest.raises(TypeError, match="RecordingJob cannot be dumped.*does not pickle"):
        job.dumps()


def test_batch_job_of_a_custom_job_is_pickled(user_home):
    from _custom_jobs import RecordingJob
    from monarch_cy._hosts.local_jobs import BatchJob
    back = job_loads(BatchJob(RecordingJob(hosts=("b",))).dumps())
    assert isinstance(back, BatchJob) and back._job.hosts == ("b",)
    assert json.loads(BatchJob(LocalJob()).dumps())["type"] == "BatchJob"   # still JSON
