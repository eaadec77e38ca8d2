"""Actor messaging benchmarks (BENCHMARKS.md, "Actor messaging"), pytest-benchmark.

Run:  PYTHONPATH=. python -m pytest bench/bench_actor.py -q -s --benchmark-disable-gc
(competitors: a separate venv with ``ray==2.60.0`` and/or ``torchmonarch==0.7.0``
next to monarch_cy's dependencies; ``BENCH_NO_RAY=1`` / ``BENCH_NO_MONARCH=1`` skip
one.)

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
# Competitors' worker processes import the bench actors too (torchmonarch's workers
# do not inherit the controller's sys.path).
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (HERE, os.environ.get("PYTHONPATH")) if p)

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


_FMT = {"us": lambda v: f"{v * 1e6:,.1f} µs", "s": lambda v: f"{v:.3f} s",
        "GB/s": lambda v: f"{v / 1e9:.2f} GB/s", "/s": lambda v: f"{v:,.0f} /s"}
OURS = {}      # key -> (value, unit, target, lower_is_better), filled by the tests
THEIRS = {}    # competitor -> {key: value}, measured in this run


def report(key, ours, unit, target, lower_is_better=True, same_run=None):
    """Print our figure, the target, and each competitor: measured in this run when
    ``same_run`` has it, else the BENCHMARKS.md anchor (labelled as such)."""
    OURS[key] = (ours, unit, target, lower_is_better)
    fmt = _FMT[unit]
    ok = ours <= target if lower_is_better else ours >= target
    line = f"\n[{key}] monarch_cy {fmt(ours)}  target {fmt(target)}  " \
           f"{'MET' if ok else 'MISSED'}"
    anchors = dict(zip(("torchmonarch", "ray"), ANCHORS.get(key, (None, None))))
    for name, a in anchors.items():
        theirs = (same_run or {}).get(name)
        where = "this run"
        if theirs is None:
            theirs, where = a, "BENCHMARKS.md anchor, not this run"
        if theirs is None:
            continue
        ratio = (theirs / ours) if lower_is_better else (ours / theirs)
        line += f"\n    {name} {fmt(theirs)} ({where}): monarch_cy is {ratio:.2f}x " \
                f"{'faster' if ratio >= 1 else 'slower'}"
    print(line)
    return ok


# -- competitors (same workload, same process, when installed) -------------------

class _Ray:
    """The same actor on Ray; one process per actor, like ours."""

    def __init__(self):
        import ray
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        self.ray = ray

        @ray.remote
        class RBench:
            def ping(self, x):
                return x

            def recv(self, arr):
                return int(arr.nbytes)

            def big(self, nbytes):
                import numpy as np
                if getattr(self, "_big", None) is None or self._big.nbytes != nbytes:
                    self._big = np.ones(nbytes, dtype=np.uint8)
                return self._big

        self.actors = [RBench.remote() for _ in range(4)]
        ray.get([a.ping.remote(0) for a in self.actors])

    def rtt(self):
        a = self.actors[0]
        return _timed(lambda: self.ray.get(a.ping.remote(1)))

    def rtt_async(self):
        a = self.actors[0]

        async def run():
            out = []
            for _ in range(2200):
                t = time.perf_counter()
                await a.ping.remote(1)
                out.append(time.perf_counter() - t)
            return out[200:]
        return asyncio.run(run())

    def gather4(self):
        return _timed(lambda: self.ray.get([a.ping.remote(1) for a in self.actors]))

    def inflight(self, n=10_000):
        a = self.actors[0]
        t = time.perf_counter()
        self.ray.get([a.ping.remote(i) for i in range(n)])
        return n / (time.perf_counter() - t)

    def inflight_async(self, n=10_000):
        a = self.actors[0]

        async def run():
            t = time.perf_counter()
            await asyncio.gather(*[a.ping.remote(i) for i in range(n)])
            return n / (time.perf_counter() - t)
        return asyncio.run(run())

    def send(self, obj):
        a = self.actors[0]
        return lambda: self.ray.get(a.recv.remote(obj))

    def fetch(self, n):
        a = self.actors[0]
        return lambda: self.ray.get(a.big.remote(n))

    def close(self):
        self.ray.shutdown()


class _Monarch:
    """The same actor on torchmonarch: 4 procs x 1 actor, same adverbs."""

    def __init__(self):
        from monarch.actor import this_host
        from _bench_actors_monarch import MBench
        self.procs = this_host().spawn_procs(per_host={"gpus": 4})
        self.mesh = self.procs.spawn("mbench", MBench)
        self.mesh.ping.call(0).get()
        self.one = self.mesh.slice(gpus=0)

    def rtt(self):
        one = self.one
        return _timed(lambda: one.ping.call_one(1).get())

    def rtt_async(self):
        one = self.one

        async def run():
            out = []
            for _ in range(2200):
                t = time.perf_counter()
                await one.ping.call_one(1)
                out.append(time.perf_counter() - t)
            return out[200:]
        return asyncio.run(run())

    def gather4(self):
        return _timed(lambda: self.mesh.ping.call(1).get())

    def inflight(self, n=10_000):
        return _inflight(self.one, n)

    def inflight_async(self, n=10_000):
        one = self.one

        async def run():
            t = time.perf_counter()
            await asyncio.gather(*[one.ping.call_one(i) for i in range(n)])
            return n / (time.perf_counter() - t)
        return asyncio.run(run())

    def send(self, obj):
        return lambda: self.one.recv.call_one(obj).get()

    def fetch(self, n):
        return lambda: self.one.big.call_one(n).get()

    def close(self):
        try:
            self.procs.stop().get()
        except Exception:
            pass


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


def _memcpy_ceiling():
    """One 64 MiB copy into warm memory, measured now: the floor of any transfer that
    must copy the caller's buffer once."""
    import numpy as np
    src = np.ones(MIB64, dtype=np.uint8)
    dst = np.empty_like(src)
    return _bw(lambda: np.copyto(dst, src), MIB64)


def _ceiling_line(bw):
    c = _memcpy_ceiling()
    print(f"    memcpy ceiling {c / 1e9:.2f} GB/s (this run): monarch_cy is {bw / c:.2f}x of it")


def test_numpy_arg_64mib(benchmark, bench):
    import numpy as np
    one = bench.slice(gpus=0)
    arr = np.ones(MIB64, dtype=np.uint8)
    bw = _bw(lambda: one.recv.call_one(arr).get(), MIB64)
    benchmark.pedantic(lambda: one.recv.call_one(arr).get(), rounds=5)
    report("np_arg", bw, "GB/s", 5e9, lower_is_better=False)
    _ceiling_line(bw)


def test_torch_arg_64mib(benchmark, bench):
    torch = pytest.importorskip("torch")
    one = bench.slice(gpus=0)
    t = torch.ones(MIB64 // 4, dtype=torch.float32)
    bw = _bw(lambda: one.recv.call_one(t).get(), MIB64)
    benchmark.pedantic(lambda: one.recv.call_one(t).get(), rounds=5)
    report("torch_arg", bw, "GB/s", 5e9, lower_is_better=False)
    _ceiling_line(bw)


def test_numpy_return_64mib(benchmark, bench):
    one = bench.slice(gpus=0)

    def fetch():
        a = one.big.call_one(MIB64).get()
        assert a.nbytes == MIB64
    bw = _bw(fetch, MIB64)
    benchmark.pedantic(fetch, rounds=5)
    report("np_ret", bw, "GB/s", 5e9, lower_is_better=False)
    _ceiling_line(bw)


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


def _compiled() -> None:
    """Bytecode for monarch_cy and the bench actors, as a regular pip install leaves
    (the competitors were installed that way; an editable checkout under
    PYTHONDONTWRITEBYTECODE would otherwise recompile in every process)."""
    import compileall
    compileall.compile_dir(os.path.join(os.path.dirname(HERE), "monarch_cy"), quiet=1)
    compileall.compile_dir(HERE, quiet=1, maxlevels=0)


def test_cold_and_warm_start(benchmark):
    _compiled()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), env.get("PYTHONPATH", "")])
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", COLD % HERE], capture_output=True,
                             text=True, env=env, check=True).stdout.split()
        runs.append((float(out[0]), float(out[1])))
    benchmark.pedantic(lambda: None, rounds=1)
    comp, warm_comp = {}, {}
    if HAVE_MONARCH and os.environ.get("BENCH_NO_MONARCH") != "1":
        try:
            code = COLD.replace("monarch_cy.actor", "monarch.actor").replace(
                "from _bench_actors import Bench", "from _bench_actors_monarch import MBench as Bench")
            out = subprocess.run([sys.executable, "-c", code % HERE], capture_output=True,
                                 text=True, env=env, check=True, timeout=120).stdout.split()
            comp["torchmonarch"] = float(out[-2])
            warm_comp["torchmonarch"] = float(out[-1])
        except Exception as e:
            print(f"\n[torchmonarch] cold start failed: {e!r}")
    if HAVE_RAY and os.environ.get("BENCH_NO_RAY") != "1":
        try:
            out = subprocess.run([sys.executable, "-c", RAY_COLD], capture_output=True,
                                 text=True, check=True, timeout=120).stdout.split()
            comp["ray"] = float(out[-1])
        except Exception as e:
            print(f"\n[ray] cold start failed: {e!r}")
    report("cold4", statistics.median(r[0] for r in runs), "s", 0.25, same_run=comp)
    for name, v in comp.items():
        THEIRS.setdefault(name, {})["cold4"] = v
    for name, v in warm_comp.items():
        THEIRS.setdefault(name, {})["warm4"] = v
    report("warm4", statistics.median(r[1] for r in runs), "s", 0.2, same_run=warm_comp)


RAY_COLD = r"""
import time
t0 = time.perf_counter()
import ray
ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)

@ray.remote
class B:
    def ping(self, x):
        return x

actors = [B.remote() for _ in range(4)]
ray.get([a.ping.remote(1) for a in actors])
print(time.perf_counter() - t0)
ray.shutdown()
"""


def test_import_time(benchmark):
    _compiled()
    code = ("import sys, time; t = time.perf_counter(); import monarch_cy.actor; "
            "print(time.perf_counter() - t, 'torch' in sys.modules)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(HERE)
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, check=True).stdout.split() for _ in range(5)]
    benchmark.pedantic(lambda: None, rounds=1)
    assert all(o[1] == "False" for o in outs)
    report("import", statistics.median(float(o[0]) for o in outs), "s", 0.1)


def _measure(runner) -> dict:
    out = {}
    lat = runner.rtt()
    out["rtt_p50"], out["rtt_p99"] = statistics.median(lat), pct(lat, 0.99)
    out["rtt_async_p50"] = statistics.median(runner.rtt_async())
    lat = runner.gather4()
    out["gather4_p50"], out["gather4_p99"] = statistics.median(lat), pct(lat, 0.99)
    out["inflight_sync"] = statistics.median(runner.inflight() for _ in range(3))
    out["inflight_async"] = statistics.median(runner.inflight_async() for _ in range(3))
    import numpy as np
    out["np_arg"] = _bw(runner.send(np.ones(MIB64, dtype=np.uint8)), MIB64)
    try:
        import torch
        out["torch_arg"] = _bw(runner.send(torch.ones(MIB64 // 4)), MIB64)
    except ImportError:
        pass
    out["np_ret"] = _bw(runner.fetch(MIB64), MIB64)
    return out


def test_zz_competitors_same_run(benchmark, procs):
    """Each installed competitor alone (ours stopped), same workloads, then the table."""
    benchmark.pedantic(lambda: None, rounds=1)
    procs.stop().get(10)     # our procs go away so each system runs alone
    todo = []
    if HAVE_MONARCH and os.environ.get("BENCH_NO_MONARCH") != "1":
        todo.append(("torchmonarch", _Monarch))
    if HAVE_RAY and os.environ.get("BENCH_NO_RAY") != "1":
        todo.append(("ray", _Ray))
    for name, cls in todo:
        try:
            runner = cls()
        except Exception as e:
            print(f"\n[{name}] could not start: {e!r}")
            continue
        try:
            THEIRS.setdefault(name, {}).update(_measure(runner))
        except Exception as e:
            print(f"\n[{name}] failed: {e!r}")
        finally:
            runner.close()
    print("\n\n| workload | monarch_cy | target | " + " | ".join(
        f"{n} (ratio)" for n in ("torchmonarch", "ray")) + " |")
    print("|---|---|---|---|---|")
    for key, (ours, unit, target, lib) in OURS.items():
        f = _FMT[unit]
        cells = []
        for name, idx in (("torchmonarch", 0), ("ray", 1)):
            theirs = THEIRS.get(name, {}).get(key)
            tag = ""
            if theirs is None and key in ANCHORS:
                theirs, tag = ANCHORS[key][idx], " [anchor]"
            if theirs is None:
                cells.append("—")
                continue
            ratio = theirs / ours if lib else ours / theirs
            cells.append(f"{f(theirs)}{tag} ({ratio:.2f}x)")
        ok = ours <= target if lib else ours >= target
        print(f"| {key} | {f(ours)} | {f(target)} {'MET' if ok else 'missed'} | "
              + " | ".join(cells) + " |")


def test_raw_floor_pipe(benchmark):  # noqa: D103
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
