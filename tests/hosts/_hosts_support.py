"""Helpers and fixtures for tests/hosts: namespace hosts, agents, controller scenarios."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from monarch_cy._hosts.netns import NetnsHosts, available

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TIMEOUT = 2.0          # MONARCH_CY_HOST_TIMEOUT for these tests (seconds)


def scenario_env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["MONARCH_CY_HOST_TIMEOUT"] = str(TIMEOUT)
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def netns_ok():
    why = available()
    if why:
        pytest.skip(f"namespace hosts unavailable: {why}")


class Hosts:
    """3 namespace hosts, each running a listening agent (stderr to a log file)."""

    def __init__(self, n: int, tmp) -> None:
        self.net = NetnsHosts(n)
        self.secret = os.urandom(32).hex()
        self.logs, self.agents = [], []
        for i in range(n):
            self.start_agent(i, tmp)

    def start_agent(self, i, tmp):
        log = open(os.path.join(tmp, f"agent{i}.log"), "w+")
        # TMPDIR: a SIGKILLed agent's run folder stays in pytest's tmp_path
        p = self.net.start_agent(i, secret_hex=self.secret,
                                 env=scenario_env(TMPDIR=tmp), stderr=log,
                                 args=["--log-level", "INFO"])
        if i < len(self.agents):
            self.agents[i], self.logs[i] = p, log
        else:
            self.agents.append(p)
            self.logs.append(log)

    @property
    def workers(self):
        return [f"tcp://{ip}:26600" for ip in self.net.ips]

    def log(self, i) -> str:
        self.logs[i].flush()
        with open(self.logs[i].name) as f:
            return f.read()

    def run(self, name: str, args: dict, *, secret=None, timeout=90, check=True,
            **env):
        e = scenario_env(MONARCH_CY_JOB_SECRET=secret or self.secret, **env)
        return run_scenario(name, dict({"workers": self.workers}, **args), e,
                            timeout, check)

    def close(self):
        self.net.close()
        for f in self.logs:
            f.close()


def run_scenario(name, args, env, timeout=90, check=True):
    r = subprocess.run([sys.executable, os.path.join(HERE, "_scenarios.py"), name,
                        json.dumps(args)], env=env, capture_output=True, text=True,
                       timeout=timeout)
    res = None
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
    if check and (r.returncode != 0 or res is None):
        raise AssertionError(f"scenario {name} failed (exit {r.returncode}):\n"
                             f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
    return res, r


@pytest.fixture
def hosts3(netns_ok, tmp_path):
    h = Hosts(3, str(tmp_path))
    try:
        yield h
    finally:
        h.close()


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if pid_alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if pid_alive(p)]
