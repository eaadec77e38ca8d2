"""RDMABuffer's TCP fallback between network namespaces (fake hosts), in GB/s.

Two namespace hosts (:mod:`monarch_cy._hosts.netns`), one agent each; the controller
attaches to both.  An actor on host 0 owns a 64 MiB numpy array and hands out an
``RDMABuffer``; an actor on host 1 reads it whole with ``backend="tcp"`` (what runs
between hosts without verbs: chunked and parallel over the CurveZMQ TCP transport;
the bytes cross two veth links and the bridge), then writes it back.  Medians of 8
after a warm-up.  The same run measures this machine's memcpy of 64 MiB (the copy
ceiling) and a bare pyzmq CURVE stream over loopback TCP (8 MiB messages, one socket
pair: what the encryption our transport insists on allows); Monarch 0.7.0's TCP
fallback, 0.92 GB/s on this machine and unencrypted, comes from BENCHMARKS.md
(another run).  Needs root and ``ip netns``; skips otherwise.

    PYTHONPATH=. python -m pytest bench/bench_rdma_hosts.py -s
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB64 = 64 << 20
MONARCH_TCP = 0.92e9        # BENCHMARKS.md: torchmonarch 0.7.0's TCP fallback here

_CTL = r"""
import json, os, statistics, sys, time
sys.path.insert(0, os.environ.get("MCY_ROOT", "."))
import numpy as np
from monarch_cy.actor import Actor, attach_to_workers, endpoint
from monarch_cy.rdma import RDMABuffer


class Side(Actor):
    @endpoint
    def make(self, n):
        self.a = np.arange(n // 8, dtype=np.uint64).view(np.uint8).copy()
        return RDMABuffer(self.a)

    @endpoint
    def host(self):
        import socket
        return socket.gethostname()

    @endpoint
    def pull_push(self, buf, rounds):
        dst = np.zeros(buf.size(), np.uint8)
        buf.read_into(dst, backend="tcp", timeout=300).get()          # warm-up
        want = np.arange(buf.size() // 8, dtype=np.uint64).view(np.uint8)
        ok = bool((dst == want).all())
        reads, writes = [], []
        for _ in range(rounds):
            t = time.perf_counter()
            buf.read_into(dst, backend="tcp", timeout=300).get()
            reads.append(time.perf_counter() - t)
            t = time.perf_counter()
            buf.write_from(dst, backend="tcp", timeout=300).get()
            writes.append(time.perf_counter() - t)
        return statistics.median(reads), statistics.median(writes), ok


def main():
    workers, n, rounds = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    procs = attach_to_workers(workers=workers, timeout=30).spawn_procs(per_host={"procs": 1})
    m = procs.spawn("side", Side)
    owner, reader = m.slice(hosts=0), m.slice(hosts=1)
    hosts = [owner.host.call_one().get(60), reader.host.call_one().get(60)]
    buf = owner.make.call_one(n).get(60)
    read_s, write_s, ok = reader.pull_push.call_one(buf, rounds).get(600)
    procs.stop().get(30)
    print("RESULT " + json.dumps({"read_s": read_s, "write_s": write_s, "ok": ok,
                                  "hosts": hosts}))


if __name__ == "__main__":
    main()
"""


def _memcpy_bw(n: int) -> float:
    src = np.ones(n, np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    times = []
    for _ in range(8):
        t = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t)
    return n / statistics.median(times)


def _curve_stream_bw(msg: int = 8 << 20, n: int = 24) -> float:
    import threading

    import zmq
    ctx = zmq.Context()
    try:
        pub, sec = zmq.curve_keypair()
        pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
        pull.curve_server, pull.curve_secretkey, pull.curve_publickey = True, sec, pub
        push.curve_serverkey, push.curve_publickey, push.curve_secretkey = pub, pub, sec
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        push.connect(f"tcp://127.0.0.1:{port}")
        data = b"x" * msg
        push.send(data)
        pull.recv()
        t = time.perf_counter()
        th = threading.Thread(target=lambda: [push.send(data, copy=False) for _ in range(n)])
        th.start()
        for _ in range(n):
            pull.recv(copy=False)
        th.join()
        return n * msg / (time.perf_counter() - t)
    finally:
        ctx.destroy(linger=0)


def test_tcp_fallback_between_namespace_hosts(benchmark):
    from monarch_cy._hosts.netns import NetnsHosts, available
    why = available()
    if why:
        pytest.skip(f"namespace hosts unavailable: {why}")
    rounds = int(os.environ.get("MCY_BENCH_ROUNDS", "8"))
    secret = os.urandom(32).hex()
    env = dict(os.environ, MCY_ROOT=ROOT, PYTHONPATH=ROOT, MONARCH_CY_JOB_SECRET=secret)
    with NetnsHosts(2) as net, tempfile.NamedTemporaryFile("w", suffix=".py") as f:
        for i in range(2):
            net.start_agent(i, secret_hex=secret, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=ROOT))
        f.write(_CTL)           # actor classes must live in a script file
        f.flush()
        time.sleep(1.0)          # let the agents finish importing
        workers = [f"tcp://{ip}:26600" for ip in net.ips]
        r = subprocess.run([sys.executable, f.name, json.dumps(workers), str(MIB64),
                            str(rounds)], env=env, capture_output=True, text=True,
                           timeout=900)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"controller failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    res = json.loads(lines[-1][7:])
    benchmark.pedantic(lambda: None, rounds=1)
    assert res["ok"], "the bytes read differ from the owner's"
    assert res["hosts"][0] != res["hosts"][1], res["hosts"]
    mem = _memcpy_bw(MIB64)
    curve = _curve_stream_bw()
    rd, wr = MIB64 / res["read_s"], MIB64 / res["write_s"]
    print(f"\nRDMABuffer TCP fallback, 64 MiB between namespace hosts {res['hosts']}:")
    print(f"  read  {rd / 1e9:6.2f} GB/s   ratio {rd / mem:.2f} of memcpy ({mem / 1e9:.2f} GB/s, "
          f"this run); {rd / MONARCH_TCP:.2f}x Monarch 0.7.0's TCP fallback "
          "(BENCHMARKS.md, another run)")
    print(f"  write {wr / 1e9:6.2f} GB/s   ratio {wr / mem:.2f} of memcpy")
    print(f"  bare pyzmq CURVE stream over loopback {curve / 1e9:.2f} GB/s (this run): read "
          f"ratio {rd / curve:.2f}, write ratio {wr / curve:.2f}")
    benchmark.extra_info.update(read_gbps=rd / 1e9, write_gbps=wr / 1e9,
                                memcpy_gbps=mem / 1e9, curve_gbps=curve / 1e9)
