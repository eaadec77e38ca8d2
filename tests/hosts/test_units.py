"""Parts of the multi-host layer that need no namespaces: validation and parsing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from monarch_cy._hosts import protocol as P
from monarch_cy._hosts.kubernetes import load_manifest, read_hosts
from monarch_cy._transport.secret import load_secret, parse_secret, write_secret_file
from monarch_cy._hosts.slurm import SlurmJob
from monarch_cy.job import SchedulerError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_secret_from_file_and_env(tmp_path, monkeypatch):
    s = os.urandom(32)
    p = write_secret_file(str(tmp_path / "s"), s)
    assert oct(os.stat(p).st_mode & 0o777) == "0o600"
    monkeypatch.delenv("MONARCH_CY_JOB_SECRET_FILE", raising=False)
    monkeypatch.setenv("MONARCH_CY_JOB_SECRET", os.urandom(32).hex())
    assert load_secret(p) == s                     # the file wins over the environment
    monkeypatch.setenv("MONARCH_CY_JOB_SECRET", s.hex())
    assert load_secret() == s
    with pytest.raises(FileExistsError):
        write_secret_file(p, s)


def test_bad_secrets_name_the_source_not_the_value(monkeypatch):
    with pytest.raises(ValueError, match=r"\$X must be 64 hex digits, found 5"):
        parse_secret("abcde", "$X")
    with pytest.raises(ValueError, match="not hexadecimal"):
        parse_secret("z" * 64, "file 'f'")
    monkeypatch.delenv("MONARCH_CY_JOB_SECRET", raising=False)
    monkeypatch.delenv("MONARCH_CY_JOB_SECRET_FILE", raising=False)
    with pytest.raises(ValueError, match="no job secret"):
        load_secret()
    with pytest.raises(ValueError, match="cannot read the job secret file '/nonexistent'"):
        load_secret("/nonexistent")


@pytest.mark.parametrize("bad", ["10.0.0.1:5", "tcp://host", "tcp://h:0", "tcp://h:x",
                                 "udp://h:1"])
def test_parse_tcp_rejects(bad):
    with pytest.raises(ValueError, match="tcp://host:port"):
        P.parse_tcp(bad)
    assert P.parse_tcp("tcp://node-1:26600") == ("node-1", 26600)


def test_attach_to_workers_validates_arguments(monkeypatch):
    from monarch_cy.actor import attach_to_workers
    with pytest.raises(TypeError, match="list of 'tcp://host:port'"):
        attach_to_workers(workers="tcp://a:1")
    with pytest.raises(ValueError, match="workers is empty"):
        attach_to_workers(workers=[])
    with pytest.raises(ValueError, match="more than once"):
        attach_to_workers(workers=["tcp://a:1", "tcp://a:1"])
    with pytest.raises(ValueError, match="ca and private_key are not supported"):
        attach_to_workers(workers=["tcp://a:1"], ca=b"cert")
    with pytest.raises(ValueError, match="timeout must be a positive"):
        attach_to_workers(workers=["tcp://a:1"], timeout=0)


def test_agent_cli_needs_a_readable_secret_and_a_mode():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONARCH_CY_JOB")}
    env["PYTHONPATH"] = ROOT
    r = subprocess.run([sys.executable, "-m", "monarch_cy._hosts.agent", "--listen",
                        "tcp://127.0.0.1:1", "--secret-file", "/nonexistent/s"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "cannot read the job secret file '/nonexistent/s'" \
        in r.stderr
    r = subprocess.run([sys.executable, "-m", "monarch_cy._hosts.agent"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--listen" in r.stderr
    r = subprocess.run([sys.executable, "-m", "monarch_cy._hosts.agent", "--listen",
                        "tcp://127.0.0.1:1", "--ports", "9-3"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--ports '9-3'" in r.stderr


def test_agent_dialing_nobody_gives_up_naming_the_address():
    env = dict(os.environ, PYTHONPATH=ROOT, MONARCH_CY_JOB_SECRET=os.urandom(32).hex())
    r = subprocess.run([sys.executable, "-m", "monarch_cy._hosts.agent", "--connect",
                        "tcp://127.0.0.1:9", "--connect-timeout", "1"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 3, r.stderr
    assert "tcp://127.0.0.1:9 did not answer within 1 s (no TCP connection)" in r.stderr


_LISTEN_LATE = """
import sys
from monarch_cy._hosts.attach import ensure_controller_node, get_hub
from monarch_cy._transport.secret import load_secret
hub = get_hub(ensure_controller_node("127.0.0.1", load_secret()))
host, = hub.listen("tcp://127.0.0.1:" + sys.argv[1]).wait(1, 20)
print("DIALED", host.info["rank"], flush=True)
"""


def test_an_agent_that_dials_before_the_controller_listens_is_heard():
    # a HELLO sent before the handshake completes is dropped by the socket, so the
    # agent must repeat it: here nobody listens for the first two seconds
    import socket
    import time
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=ROOT, MONARCH_CY_JOB_SECRET=os.urandom(32).hex())
    agent = subprocess.Popen([sys.executable, "-m", "monarch_cy._hosts.agent", "--connect",
                              f"tcp://127.0.0.1:{port}", "--rank", "7",
                              "--connect-timeout", "40"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2.0)
        r = subprocess.run([sys.executable, "-c", _LISTEN_LATE, str(port)], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "DIALED 7" in r.stdout, r.stderr[-3000:]
    finally:
        agent.kill()
        agent.wait(10)


def test_sbatch_script_keeps_the_secret_out():
    job = SlurmJob({"a": 2, "b": 1}, partition="gpu", time_limit="1:00:00",
                   gpus_per_node=8, slurm_args=["--account=x"], log_dir="/tmp")
    script = job._sbatch_script(job._agent_cmd("tcp://10.0.0.1:26600"))
    assert "#SBATCH --nodes=3" in script and "#SBATCH --partition=gpu" in script
    assert "#SBATCH --gpus-per-node=8" in script and "#SBATCH --account=x" in script
    assert "--connect tcp://10.0.0.1:26600 --once" in script
    assert "SECRET" not in script.upper()


def test_slurm_job_validates():
    with pytest.raises(TypeError, match="non-empty dict"):
        SlurmJob({})
    with pytest.raises(ValueError, match="positive number of hosts"):
        SlurmJob({"a": 0})
    with pytest.raises(ValueError, match="proc_ports"):
        SlurmJob({"a": 1}, proc_ports="1:2")
    assert issubclass(SchedulerError, RuntimeError)


def test_kubernetes_manifest_hosts(tmp_path):
    yaml = pytest.importorskip("yaml", reason="PyYAML not installed: the YAML manifest "
                               "is checked through its JSON form below")
    objs = load_manifest(os.path.join(ROOT, "deploy/k8s/monarch-cy.yaml"))
    assert read_hosts(objs) == (4, 26600)
    assert yaml


def test_kubernetes_json_manifest(tmp_path):
    objs = [{"kind": "Service", "metadata": {"name": "c"},
             "spec": {"ports": [{"port": 80, "targetPort": 26600}]}},
            {"kind": "StatefulSet", "metadata": {"name": "a"}, "spec": {"replicas": 3}}]
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"kind": "List", "items": objs}))
    assert read_hosts(load_manifest(str(p))) == (3, 26600)
    with pytest.raises(ValueError, match="exactly one StatefulSet named 'x'"):
        read_hosts(objs, agents="x")
