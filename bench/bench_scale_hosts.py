"""The controller's cost as the mesh grows, across network-namespace hosts (issue 18).

Run:  PYTHONPATH=. python -m pytest bench/bench_scale_hosts.py -q -s --benchmark-disable-gc
(needs root and ``ip netns``: skips otherwise.  ``BENCH_SCALE_HOSTS`` namespace hosts,
default 4; ``BENCH_SCALE_PER_HOST`` procs per host, default ``2,8,32`` (8 to 128 procs in
all); ``BENCH_SCALE_CALLS`` the casts timed per size, default 100; torchmonarch, when
importable, runs every size up to ``BENCH_SCALE_MONARCH_MAX`` procs in all, default 128;
``BENCH_SCALE_HOSTS_PLOT=path.png`` draws cost against mesh size.)

The same measurement as ``bench_scale.py`` (spawn to the first answered ``call``, then
cast+gather p50/p99 and the controller's own CPU per call, then an ``Accumulator`` sum),
with the procs spread over namespace hosts: each host runs one agent per system,
listening before the run (ours: ``python -m monarch_cy._hosts.agent``; torchmonarch:
``run_worker_loop_forever``), and every hop between hosts is TCP over a veth pair.  The
controller attaches to the agents (``attach_to_workers``) and spawns
``per_host={"procs": P}``.  A fresh controller process per system and size; each system
runs alone on the machine in turn.

torchmonarch's controller binds the address its hostname resolves to, so its controller
and workers run in a mount namespace whose ``/etc/hosts`` maps each host name to its
namespace address (and the namespaces route to the bridge); the machine's own
``/etc/hosts`` is untouched.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from bench_scale import MEASURE, TIMEOUT_S, against, describe, plot, record

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HOSTS = int(os.environ.get("BENCH_SCALE_HOSTS", "4"))
PER_HOST = [int(s) for s in os.environ.get("BENCH_SCALE_PER_HOST", "2,8,32").split(",") if s]
CALLS = int(os.environ.get("BENCH_SCALE_CALLS", "100"))
MONARCH_MAX = int(os.environ.get("BENCH_SCALE_MONARCH_MAX", "128"))
OUR_PORT, THEIR_PORT = 26600, 26601

_HEAD = {
    "monarch_cy": r"""
import json, sys, time
sys.path.insert(0, %(here)r)
workers, per, calls = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
from monarch_cy.actor import attach_to_workers
from _bench_actors import Bench
pm = attach_to_workers(workers=workers, timeout=60).spawn_procs(per_host={"procs": per})
n = len(workers) * per
""",
    "torchmonarch": r"""
import json, sys, time
sys.path.insert(0, %(here)r)
workers, per, calls = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
from monarch.actor import attach_to_workers, enable_transport
from _bench_actors_monarch import MBench as Bench
enable_transport("tcp")
hm = attach_to_workers(ca="trust_all_connections", workers=workers)
pm = hm.spawn_procs(per_host={"procs": per})
n = len(workers) * per
""",
}
_SPEC = {
    "monarch_cy": {"module": "monarch_cy.actor", "acc_kw": ", merge=operator.add"},
    "torchmonarch": {"module": "monarch.actor", "acc_kw": ""},
}


def _have_monarch() -> bool:
    try:
        import monarch.actor  # noqa: F401
        return True
    except Exception:
        return False


class _Cluster:
    """``HOSTS`` namespace hosts, each with our agent and (when importable)
    torchmonarch's worker listening."""

    def __init__(self, tmp: str) -> None:
        from monarch_cy._hosts.netns import NetnsHosts
        self.net = net = NetnsHosts(HOSTS)
        self.tmp = tmp
        self.secret = os.urandom(32).hex()
        for name in net.names:          # torchmonarch's controller is reached by route
            subprocess.run(["ip", "-n", name, "route", "add", "default", "via",
                            net.gateway], check=True)
        self.hosts_file = os.path.join(tmp, "hosts")
        with open(self.hosts_file, "w") as f:
            f.write(f"127.0.0.1 localhost\n{net.gateway} {socket.gethostname()}\n")
            f.writelines(f"{ip} {hn}\n" for ip, hn in zip(net.ips, net.hostnames))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]))
        self.logs = []
        for i in range(HOSTS):
            log = open(os.path.join(tmp, f"agent{i}.log"), "w")
            self.logs.append(log)
            net.start_agent(i, secret_hex=self.secret, port=OUR_PORT, env=env, stderr=log)
        self.monarch = _have_monarch()
        if self.monarch:
            for i in range(HOSTS):
                code = ("from monarch.actor import run_worker_loop_forever\n"
                        "run_worker_loop_forever(ca='trust_all_connections', "
                        f"address='tcp://{net.ips[i]}:{THEIR_PORT}')\n")
                net.popen(i, [*self.hosts_view(), sys.executable, "-c", code], env=env,
                          stdout=self.logs[i], stderr=subprocess.STDOUT)
        time.sleep(3.0)                  # every agent listening

    def hosts_view(self) -> list:
        """A command prefix: run in a mount namespace that sees our ``/etc/hosts``."""
        return ["unshare", "-m", "sh", "-c",
                f'mount --bind {self.hosts_file} /etc/hosts && exec "$@"', "sh"]

    def workers(self, system: str) -> list:
        port = OUR_PORT if system == "monarch_cy" else THEIR_PORT
        return [f"tcp://{ip}:{port}" for ip in self.net.ips]

    def run(self, system: str, per: int) -> dict:
        code = _HEAD[system] % {"here": HERE} + MEASURE % {
            **_SPEC[system], "timeout": TIMEOUT_S}
        with tempfile.NamedTemporaryFile("w", suffix=".py", dir=self.tmp,
                                         delete=False) as f:
            f.write(code)
        env = dict(os.environ, MONARCH_CY_JOB_SECRET=self.secret,
                   PYTHONPATH=os.pathsep.join([ROOT, HERE]))
        prefix = self.hosts_view() if system == "torchmonarch" else []
        try:
            r = subprocess.run([*prefix, sys.executable, f.name,
                                json.dumps(self.workers(system)), str(per), str(CALLS)],
                               capture_output=True, text=True, env=env,
                               timeout=TIMEOUT_S + 120)
        except subprocess.TimeoutExpired:
            return {"error": f"no result within {TIMEOUT_S + 120} s"}
        for line in r.stdout.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        tail = (r.stderr or r.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {r.returncode}: " + " | ".join(tail)}

    def close(self) -> None:
        self.net.close()
        for f in self.logs:
            f.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from monarch_cy._hosts.netns import available
    why = available()
    if why:
        pytest.skip(f"namespace hosts unavailable: {why}")
    c = _Cluster(str(tmp_path_factory.mktemp("scale_hosts")))
    try:
        yield c
    finally:
        c.close()


RESULTS: dict[str, dict[int, dict]] = {}


@pytest.mark.parametrize("per", PER_HOST)
def test_cast_and_gather_cost_across_hosts(benchmark, cluster, per):
    n = HOSTS * per
    systems = ["monarch_cy"]
    if cluster.monarch and os.environ.get("BENCH_NO_MONARCH") != "1" and n <= MONARCH_MAX:
        systems.append("torchmonarch")
    row = {s: cluster.run(s, per) for s in systems}
    benchmark.pedantic(lambda: None, rounds=1)
    for s, res in row.items():
        RESULTS.setdefault(s, {})[n] = res
    ours = row["monarch_cy"]
    assert "error" not in ours, ours["error"]
    print(f"\n[scale-hosts {HOSTS}x{per}={n}] " + describe(ours)
          + against(ours, row.get("torchmonarch")))
    record({"bench": "scale_hosts", "hosts": HOSTS, "n": n, **row})
    path = os.environ.get("BENCH_SCALE_HOSTS_PLOT")
    if path:
        plot(RESULTS, path, f"procs over {HOSTS} namespace hosts (one actor each)")
