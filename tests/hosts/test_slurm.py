"""SlurmJob against a real SLURM (munged, slurmctld, one slurmd per namespace host)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from _slurm_cluster import SlurmCluster, slurm_available
from _hosts_support import TIMEOUT, pid_alive, run_scenario, scenario_env, wait_gone
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


# -- Monarch's parameters, bad input, cached re-attach, controllers in allocations --

SCEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_slurm_scenarios.py")


def _env(c, tmp_path, **extra):
    env = scenario_env(SLURM_CONF=c.conf, TMPDIR=str(tmp_path), **extra)
    for k in [k for k in env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
        env.pop(k)
    return env


def _scen(name, args, env, *, prefix=(), timeout=120, check=True):
    r = subprocess.run([*prefix, sys.executable, SCEN, name, json.dumps(args)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    res = _result(r.stdout)
    if check and (r.returncode != 0 or res is None):
        raise AssertionError(f"scenario {name} failed (exit {r.returncode}):\n"
                             f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
    return res, r


def _result(text):
    res = None
    for line in text.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
    return res


def _strays(tmp_path, timeout=10.0) -> list:
    """Processes still running with this test's TMPDIR (watchdogs, srun, agents, procs)."""
    mark = f"TMPDIR={tmp_path}".encode()
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if mark in f.read().split(b"\0") and pid_alive(int(pid)):
                        with open(f"/proc/{pid}/cmdline", "rb") as g:
                            left.append((int(pid), g.read().replace(b"\0", b" ")[:200]))
            except OSError:
                continue
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _assert_nothing_left(c, tmp_path):
    assert _wait_no_jobs(c, 15) == "", "a SLURM job was left queued or running"
    assert _strays(tmp_path) == [], "processes were left running"


def test_slurm_monarch_parameters_reach_the_scheduler(cluster, tmp_path):
    kw = {"ntasks_per_node": 2, "time_limit": "00:07:00", "partition": "mcy",
          "slurm_args": ["--comment=mcy-params"], "job_name": "mcy_params"}
    res, _ = _scen("params", {"log_dir": str(tmp_path), "kw": kw}, _env(cluster, tmp_path))
    rec = res["scontrol"]
    assert rec["NumNodes"] == "2" and rec["NumTasks"] == "4", rec
    assert rec["NtasksPerN:B:S:C"].startswith("2:"), rec
    assert rec["TimeLimit"] == "00:07:00" and rec["Partition"] == "mcy", rec
    assert rec["Comment"] == "mcy-params" and rec["JobName"] == "mcy_params", rec
    assert len(res["hosts"]) == 4 and len(set(res["hosts"])) == 2, res["hosts"]
    assert os.path.exists(tmp_path / f"slurm-{res['job']}-mcy_params.out")
    _assert_nothing_left(cluster, tmp_path)


@pytest.mark.parametrize("args,named,verbatim", [
    ({"kw": {"slurm_args": ["--no-such-option=1"]}},
     "slurm_args[0]='--no-such-option=1'", "sbatch: unrecognized option '--no-such-option=1'"),
    ({"kw": {"partition": "nosuchpartition"}},
     "partition='nosuchpartition'", "sbatch: error: invalid partition specified: nosuchpartition"),
    ({"kw": {"slurm_args": ["--nodelist=nosuchnode"]}},
     "slurm_args[0]='--nodelist=nosuchnode'", "Batch job submission failed: Invalid node name"),
    ({"kw": {"gpus_per_node": 1}},
     "gpus_per_node=1", "sbatch: error: Invalid generic resource (gres) specification"),
], ids=["unknown-option", "partition", "nodelist", "gpus"])
def test_slurm_bad_input_names_parameter_and_quotes_sbatch(cluster, tmp_path, args,
                                                           named, verbatim):
    res, _ = _scen("bad", dict(args, log_dir=str(tmp_path)), _env(cluster, tmp_path))
    assert res["type"] == "SchedulerError", res
    assert "sbatch rejected the job" in res["error"], res
    assert named in res["error"] and verbatim in res["error"], res
    _assert_nothing_left(cluster, tmp_path)


def test_slurm_unreachable_node_list_times_out_with_slurms_reason(cluster, tmp_path):
    node = cluster.nodes[2]
    env = _env(cluster, tmp_path)
    # DRAIN, not DOWN: with ReturnToService=2 a DOWN node whose slurmd answers the next
    # ping is back in service within seconds, and the job would then run
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain",
                    "reason=mcy test: unreachable"], env=env, check=True)
    try:
        res, _ = _scen("bad", {"log_dir": str(tmp_path), "meshes": {"m": 1}, "timeout": 3,
                               "kw": {"slurm_args": [f"--nodelist={node}"]}}, env)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"],
                       env=env, check=True)
    assert res["type"] == "SchedulerError", res
    assert "did not start within 3 s: PENDING (ReqNodeNotAvail" in res["error"], res
    assert node in res["error"], res
    _assert_nothing_left(cluster, tmp_path)
    for _ in range(100):
        if f"{node} idle" in subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=env,
                                            capture_output=True, text=True).stdout:
            break
        time.sleep(0.1)


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("via", ["scontrol", "sbatch"])
def test_slurm_unreachable_slurmctld_shows_the_tools_error(cluster, tmp_path, via):
    with open(cluster.conf) as f:
        conf = f.read()
    bad = tmp_path / "slurm.conf"
    bad.write_text(re.sub(r"(?m)^SlurmctldPort=.*$", f"SlurmctldPort={_free_port()}", conf)
                   + "MessageTimeout=2\n")
    env = _env(cluster, tmp_path)
    env["SLURM_CONF"] = str(bad)
    kw = {} if via == "scontrol" else {"controller_host": cluster.net.gateway}
    res, _ = _scen("bad", {"log_dir": str(tmp_path), "kw": kw, "timeout": 10}, env)
    assert res["type"] == "SchedulerError", res
    assert "Unable to contact slurm controller" in res["error"], res
    if via == "scontrol":
        assert "`scontrol show config` failed: slurm_load_ctl_conf error" in res["error"]
        assert "SlurmctldHost" not in res["error"], res
    else:
        assert "sbatch rejected the job: sbatch: error: Batch job submission failed" \
            in res["error"], res
    assert _strays(tmp_path) == []


def test_slurm_cached_state_reattaches_from_later_controllers(cluster, tmp_path):
    env = _env(cluster, tmp_path)
    cache = str(tmp_path / ".monarch" / "job_state.json")
    a = {"log_dir": str(tmp_path), "meshes": {"m": 2}, "cache": cache}
    first, r = _scen("cached", dict(a, end="die"), env, check=False)
    assert r.returncode == -signal.SIGKILL and first, r.stderr[-3000:]
    assert first["mode"] == "0o600", first
    time.sleep(TIMEOUT + 1.5)             # past the agents' heartbeat timeout
    assert _squeue(cluster) == f"{first['job']} RUNNING", "the cached job died with " \
        "its first controller"
    second, _ = _scen("cached", dict(a, end="exit"), env)
    assert second["job"] == first["job"], (first, second)
    assert second["took"] < 10, second     # re-attached, not scheduled anew
    assert second["hosts"] == first["hosts"], (first, second)
    assert _squeue(cluster) == f"{first['job']} RUNNING"
    third, _ = _scen("cached", dict(a, end="kill"), env)
    assert third["job"] == first["job"] and third["hosts"] == first["hosts"]
    assert not os.path.exists(cache), "kill() left the cached state"
    _assert_nothing_left(cluster, tmp_path)


def test_slurm_cached_job_of_another_spec_is_replaced(cluster, tmp_path):
    env = _env(cluster, tmp_path)
    cache = str(tmp_path / "state.json")
    a = {"log_dir": str(tmp_path), "cache": cache}
    first, _ = _scen("cached", dict(a, meshes={"m": 2}, end="exit"), env)
    assert _squeue(cluster) == f"{first['job']} RUNNING"
    second, _ = _scen("cached", dict(a, meshes={"m": 1}, end="kill"), env)
    assert second["job"] != first["job"] and len(second["hosts"]) == 1, (first, second)
    _assert_nothing_left(cluster, tmp_path)


def test_slurm_controller_inside_salloc(cluster, tmp_path):
    env = _env(cluster, tmp_path)
    res, r = _scen("inside", {"log_dir": str(tmp_path), "meshes": {"m": 3}}, env,
                   prefix=["salloc", "-N3", "--job-name=mcy_salloc"])
    assert res["step"] and res["job"] == res["env_job"], res
    assert sorted(res["hosts"]) == sorted(cluster.net.hostnames), res
    _assert_nothing_left(cluster, tmp_path)


def test_slurm_controller_in_an_sbatch_batch_script(cluster, tmp_path):
    env = _env(cluster, tmp_path)
    script = tmp_path / "batch.sh"
    args = json.dumps({"log_dir": str(tmp_path), "meshes": {"m": 3}})
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes=3\n#SBATCH --output={tmp_path}/b.out\n"
                      f"exec {shlex.join([sys.executable, SCEN, 'inside', args])}\n")
    job = subprocess.run(["sbatch", "--parsable", str(script)], env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    assert _wait_no_jobs(cluster, 90) == "", "the batch job did not end"
    out = (tmp_path / "b.out").read_text()
    res = _result(out)
    assert res is not None, out[-5000:]
    assert res["step"] and res["job"] == res["env_job"] == job, res
    assert res["me"] == cluster.net.hostnames[0], res       # the batch host
    assert sorted(res["hosts"]) == sorted(cluster.net.hostnames), res
    _assert_nothing_left(cluster, tmp_path)


@pytest.mark.parametrize("kw,exc,words", [
    ({"slurm_args": "--qos=high"}, TypeError, "slurm_args must be a list"),
    ({"slurm_args": ["qos=high"]}, ValueError, "slurm_args[0] must be one sbatch option"),
    ({"slurm_args": ["--comment=a\n#SBATCH --x"]}, ValueError, "slurm_args[0]"),
    ({"ntasks_per_node": 0}, ValueError, "ntasks_per_node must be >= 1, got 0"),
    ({"ntasks_per_node": 1.5}, TypeError, "ntasks_per_node must be an int"),
    ({"gpus_per_node": -1}, ValueError, "gpus_per_node must be >= 1"),
    ({"time_limit": "1:00\n"}, ValueError, "time_limit must be a non-empty str"),
    ({"partition": "a b"}, ValueError, "partition must be a non-empty str"),
    ({"monarch_port": 70000}, ValueError, "monarch_port must be 0..65535"),
    ({"job_start_timeout": 0}, ValueError, "job_start_timeout must be a positive"),
    ({"out_of_cluster": True}, ValueError, "out_of_cluster=True"),
    ({"exclusive": "no"}, TypeError, "exclusive must be True or False, got str 'no'"),
    ({"exclusive": 1}, TypeError, "exclusive must be True or False, got int 1"),
    ({"out_of_cluster": "False"}, TypeError,
     "out_of_cluster must be True or False, got str 'False'"),
    ({"use_allocation": "yes"}, TypeError,
     "use_allocation must be True or False or None, got str 'yes'"),
])
def test_slurm_job_arguments_are_checked_before_submitting(kw, exc, words):
    from monarch_cy.job import SlurmJob
    with pytest.raises(exc) as e:
        SlurmJob({"m": 1}, **kw)
    assert words in str(e.value)


def test_slurm_job_takes_monarchs_arguments_positionally():
    from monarch_cy.job import SlurmJob
    j = SlurmJob({"a": 2, "b": 1}, "python3", ["--qos=x"], 26610, "nm", 4, "1:00:00",
                 "gpu", "/logs", True, 8, 2, "10G", 30, "acct", "hi")
    script = j._sbatch_script(["agent"])
    for line in ("#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=4", "#SBATCH --job-name=nm",
                 "#SBATCH --time=1:00:00", "#SBATCH --partition=gpu",
                 "#SBATCH --gpus-per-node=8", "#SBATCH --cpus-per-task=2",
                 "#SBATCH --mem=10G", "#SBATCH --account=acct", "#SBATCH --qos=hi",
                 "#SBATCH --exclusive", "#SBATCH --qos=x",
                 "#SBATCH --output=/logs/slurm-%j-nm.out",
                 "srun --nodes=3 --ntasks=3 --ntasks-per-node=1 --cpus-per-task=8 agent"):
        assert line + "\n" in script, (line, script)
    with pytest.raises(TypeError, match="cached_path must be a path"):
        j.state(30)
