"""Multi-host spawn and broadcast-and-gather over network-namespace hosts.

For 1, 4 and 16 namespace hosts (one agent each, already listening), in a fresh
controller per size: the time from ``attach_to_workers`` to every actor of a
``per_host={"procs": 1}`` mesh answering, and the p50 of a broadcast-and-gather
(``mesh.ping.call()`` over all actors).  The same-run anchor is the local path:
``this_host().spawn_procs`` of as many procs, and the same call on it; the ratio
shows what the agents and TCP add.  Spawning on many hosts happens in parallel (one
request per agent, all sent before any answer), so 16 hosts should cost far less
than 16 x 1 host.  Needs root and ``ip netns``; skips otherwise.

    PYTHONPATH=. python -m pytest bench/bench_hosts.py -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CTL = r"""
import json, os, sys, time
sys.path.insert(0, os.environ.get("MCY_ROOT", "."))
from monarch_cy.actor import Actor, endpoint, this_host


class P(Actor):
    @endpoint
    def ping(self, x):
        return x


def main():
    workers, calls = json.loads(sys.argv[1]), int(sys.argv[2])
    t0 = time.perf_counter()
    if workers:
        from monarch_cy.actor import attach_to_workers
        hm = attach_to_workers(workers=workers, timeout=30)
        procs = hm.spawn_procs(per_host={"procs": 1})
    else:
        procs = this_host().spawn_procs(per_host={"procs": int(sys.argv[3])})
    m = procs.spawn("p", P)
    m.ping.call(0).get(60)
    spawn = time.perf_counter() - t0
    lat = []
    for i in range(calls):
        t = time.perf_counter()
        m.ping.call(i).get(30)
        lat.append(time.perf_counter() - t)
    lat.sort()
    procs.stop().get(20)
    print("RESULT " + json.dumps({"spawn": spawn, "p50": lat[len(lat) // 2],
                                  "p99": lat[int(len(lat) * 0.99)]}))


if __name__ == "__main__":
    main()
"""


def _run(workers, calls, nlocal=0, extra_env=None):
    env = dict(os.environ, MCY_ROOT=ROOT, PYTHONPATH=ROOT, **(extra_env or {}))
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(_CTL)          # actor classes must live in a script file
    try:
        r = subprocess.run([sys.executable, f.name, json.dumps(workers), str(calls),
                            str(nlocal)], env=env, capture_output=True, text=True,
                           timeout=300)
    finally:
        os.unlink(f.name)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise AssertionError(f"controller failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")


def test_bench_hosts_spawn_and_gather():
    from monarch_cy._hosts.netns import NetnsHosts, available
    why = available()
    if why:
        pytest.skip(f"namespace hosts unavailable: {why}")
    calls = int(os.environ.get("MCY_BENCH_CALLS", "200"))
    rows = []
    for n in (1, 4, 16):
        secret = os.urandom(32).hex()
        with NetnsHosts(n) as net:
            for i in range(n):
                net.start_agent(i, secret_hex=secret, stderr=subprocess.DEVNULL,
                                env=dict(os.environ, PYTHONPATH=ROOT))
            workers = [f"tcp://{ip}:26600" for ip in net.ips]
            time.sleep(0.5 + 0.15 * n)       # let the agents finish importing
            remote = _run(workers, calls, extra_env={"MONARCH_CY_JOB_SECRET": secret})
        local = _run([], calls, nlocal=n)
        rows.append((n, remote, local))
    print()
    print(f"{'hosts':>5} | {'spawn (agents)':>14} | {'spawn (local)':>13} | "
          f"{'gather p50':>10} | {'local p50':>9} | {'ratio':>5} | {'gather p99':>10}")
    for n, r, l in rows:
        print(f"{n:>5} | {r['spawn'] * 1e3:>11.0f} ms | {l['spawn'] * 1e3:>10.0f} ms | "
              f"{r['p50'] * 1e6:>7.0f} µs | {l['p50'] * 1e6:>6.0f} µs | "
              f"{r['p50'] / l['p50']:>5.1f} | {r['p99'] * 1e6:>7.0f} µs")
    one, sixteen = rows[0][1]["spawn"], rows[2][1]["spawn"]
    print(f"16 hosts spawn / 1 host spawn = {sixteen / one:.1f} (16 = serial)")
