"""SlurmJob against a real SLURM (munged, slurmctld, one slurmd per namespace host)."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from _slurm_cluster import SlurmCluster, slurm_available
from _hosts_support import TIMEOUT, run_scenario, scenario_env, wait_gone
from monarch_cy._hosts.netns import NetnsHosts


@pytest.fixture(scope="module")
def cluster(netns_ok):
    why = slurm_available()
    if why:
        pytest.skip(f"SLURM unavailable: {why}")
    net = NetnsHosts(3)
    try:
        c = SlurmCluster(net)
    except BaseException:
        net.close()
        raise
    try:
        yield c
    finally:
        c.close()
        net.close()


def _squeue(c) -> str:
    return subprocess.run(["squeue", "-h", "-o", "%i %T"], env=c.env(),
                          capture_output=True, text=True).stdout.strip()


def _wait_no_jobs(c, timeout=10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        q = _squeue(c)
        if not q:
            return ""
        time.sleep(0.2)
    return q


def test_slurm_job_hosts_meshes_and_cancel(cluster, tmp_path):
    env = scenario_env(SLURM_CONF=cluster.conf, TMPDIR=str(tmp_path))
    env.pop("SLURM_JOB_ID", None)
    res, _ = run_scenario("slurm", {"log_dir": str(tmp_path)}, env)
    node_names = set(cluster.net.hostnames)
    assert set(res["hosts"]) | {res["extra"]} == node_names, res
    assert res["hosts"][0] == res["hosts"][1] != res["hosts"][2], res
    assert _wait_no_jobs(cluster) == "", "the job outlived kill()"


def test_slurm_job_cancelled_when_controller_dies(cluster, tmp_path):
    env = scenario_env(SLURM_CONF=cluster.conf, TMPDIR=str(tmp_path))
    env.pop("SLURM_JOB_ID", None)
    res, r = run_scenario("slurm", {"log_dir": str(tmp_path), "die": True}, env,
                          check=False)
    assert r.returncode == -signal.SIGKILL, r.stderr[-3000:]
    assert res and res["job"], r.stdout
    assert _wait_no_jobs(cluster, TIMEOUT + 8) == "", "job still queued after the " \
        "controller died"


@pytest.mark.parametrize("args,needle", [
    ({"nodes": 5}, "sbatch rejected the job"),
    ({"nodes": 1, "partition": "nosuchpartition"}, "invalid partition"),
])
def test_slurm_rejected_submission_surfaces_message(cluster, tmp_path, args, needle):
    env = scenario_env(SLURM_CONF=cluster.conf, TMPDIR=str(tmp_path))
    env.pop("SLURM_JOB_ID", None)
    res, _ = run_scenario("slurm_rejected", dict(args, log_dir=str(tmp_path)), env)
    assert needle in res["error"].lower() or needle in res["error"], res
