"""The controller's cost as the mesh grows (issue 18), pytest-benchmark.

Run:  PYTHONPATH=. python -m pytest bench/bench_scale.py -q -s --benchmark-disable-gc
(torchmonarch in the same venv runs the same script in the same run; ``BENCH_NO_MONARCH=1``
skips it.  ``BENCH_SCALE_SIZES=8,32,128,512,1024`` picks the mesh sizes, default
``8,32,128,512``; ``BENCH_SCALE_CALLS`` the casts timed per size, default 200;
torchmonarch runs up to ``BENCH_SCALE_MONARCH_MAX`` procs, default 128 (at 512 it did not
finish spawning within 15 minutes here); ``monarch_cy-direct`` is monarch_cy with the cast
tree off (``MONARCH_CY_CAST_FANOUT=0``), the same-run comparison with the code before it;
``BENCH_SCALE_PLOT=path.png`` also draws cost against mesh size with matplotlib.)

For each size, one fresh controller process per system: spawn N procs with one actor
each (``spawn_procs(per_host={"gpus": N})``, ``spawn``, the first ``call`` answered:
the spawn time), then ``call(1).get()`` to the whole mesh, timed one by one (p50/p99
wall) and the controller's own CPU time per call (``time.process_time()`` over the
timed calls: every thread of the controller process, not wall time); then the same
for an ``Accumulator`` sum (ours with ``merge=operator.add``: folded on the way back;
torchmonarch's folds every reply in the controller).  Each system
runs alone on the machine in turn.  Figures go to ``bench/RESULTS.md`` as ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SIZES = [int(s) for s in os.environ.get("BENCH_SCALE_SIZES", "8,32,128,512").split(",") if s]
CALLS = int(os.environ.get("BENCH_SCALE_CALLS", "200"))
TIMEOUT_S = 900

# After the mesh is made: the first call (the end of the spawn time), the timed calls,
# the Accumulator, the RESULT line.  Shared with bench_scale_hosts.py.
MEASURE = r"""
m = pm.spawn("b", Bench)
first = m.ping.call(0).get(%(timeout)d)
spawn = time.perf_counter() - t0
assert len(list(first.values())) == n, "not every actor answered"
for _ in range(10):
    m.ping.call(1).get(%(timeout)d)
walls = []
cpu0 = time.process_time()
for _ in range(calls):
    t = time.perf_counter()
    v = m.ping.call(1).get(%(timeout)d)
    walls.append(time.perf_counter() - t)
cpu = (time.process_time() - cpu0) / calls
assert sorted(v.values()) == [1] * n
import operator
from %(module)s import Accumulator
acc = Accumulator(m.ping, 0, operator.add%(acc_kw)s)
assert acc.accumulate(1).get(%(timeout)d) == n
acc_walls = []
cpu0 = time.process_time()
for _ in range(calls):
    t = time.perf_counter()
    total = acc.accumulate(1).get(%(timeout)d)
    acc_walls.append(time.perf_counter() - t)
acc_cpu = (time.process_time() - cpu0) / calls
assert total == n
walls.sort()
acc_walls.sort()
print("RESULT " + json.dumps({"spawn_s": spawn, "p50_s": walls[len(walls) // 2],
                              "p99_s": walls[min(len(walls) - 1, int(len(walls) * 0.99))],
                              "cpu_per_call_s": cpu,
                              "acc_p50_s": acc_walls[len(acc_walls) // 2],
                              "acc_cpu_per_call_s": acc_cpu}), flush=True)
try:
    pm.stop().get(120)
except Exception:
    pass
"""

SCRIPT = r"""
import json, sys, time
sys.path.insert(0, %(here)r)
n, calls = int(sys.argv[1]), int(sys.argv[2])
t0 = time.perf_counter()
from %(module)s import this_host
from %(actors)s import %(cls)s as Bench
pm = this_host().spawn_procs(per_host={"gpus": n})
""" + MEASURE

_MERGE = ", merge=operator.add"      # ours: the sum is folded on the way back
SYSTEMS = {
    "monarch_cy": {"module": "monarch_cy.actor", "actors": "_bench_actors", "cls": "Bench",
                   "acc_kw": _MERGE},
    # the same code with the cast tree off: every actor sent to, and answering, directly
    "monarch_cy-direct": {"module": "monarch_cy.actor", "actors": "_bench_actors",
                          "cls": "Bench", "acc_kw": _MERGE,
                          "env": {"MONARCH_CY_CAST_FANOUT": "0"}},
    # Monarch's Accumulator folds a stream of every reply in the controller
    "torchmonarch": {"module": "monarch.actor", "actors": "_bench_actors_monarch",
                     "cls": "MBench", "acc_kw": ""},
}


def _have_monarch() -> bool:
    try:
        import monarch.actor  # noqa: F401
        return True
    except Exception:
        return False


def _run(system: str, n: int) -> dict:
    spec = {k: v for k, v in SYSTEMS[system].items() if k != "env"}
    code = SCRIPT % {**spec, "here": HERE, "timeout": TIMEOUT_S}
    env = {**os.environ, **SYSTEMS[system].get("env", {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, HERE, env.get("PYTHONPATH")) if p)
    r = subprocess.run([sys.executable, "-c", code, str(n), str(CALLS)], capture_output=True,
                       text=True, env=env, timeout=TIMEOUT_S + 120)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (r.stderr or r.stdout).strip().splitlines()[-5:]
    return {"error": f"exit {r.returncode}: " + " | ".join(tail)}


RESULTS: dict[str, dict[int, dict]] = {}


@pytest.mark.parametrize("n", SIZES)
def test_cast_and_gather_cost_by_mesh_size(benchmark, n):
    systems = ["monarch_cy", "monarch_cy-direct"]
    if os.environ.get("BENCH_NO_MONARCH") != "1" and _have_monarch() and \
            n <= int(os.environ.get("BENCH_SCALE_MONARCH_MAX", "128")):
        systems.append("torchmonarch")
    row = {s: _run(s, n) for s in systems}
    benchmark.pedantic(lambda: None, rounds=1)
    for s, res in row.items():
        RESULTS.setdefault(s, {})[n] = res
    ours = row["monarch_cy"]
    assert "error" not in ours, ours["error"]
    line = f"\n[scale n={n}] " + describe(ours)
    direct = row.get("monarch_cy-direct")
    if direct is not None and "error" not in direct:
        line += (f"; tree off: p50 {direct['p50_s'] * 1e3:.2f} ms, CPU "
                 f"{direct['cpu_per_call_s'] * 1e3:.2f} ms/call "
                 f"({direct['cpu_per_call_s'] / ours['cpu_per_call_s']:.2f}x), sum CPU "
                 f"{direct['acc_cpu_per_call_s'] * 1e3:.2f} ms/call "
                 f"({direct['acc_cpu_per_call_s'] / ours['acc_cpu_per_call_s']:.2f}x)")
    print(line + against(ours, row.get("torchmonarch")))
    record({"bench": "scale", "n": n, **row})
    _plot()


def describe(ours: dict) -> str:
    """One system's figures, for the printed report."""
    return (f"monarch_cy: spawn {ours['spawn_s']:.2f} s, cast+gather p50 "
            f"{ours['p50_s'] * 1e3:.2f} ms p99 {ours['p99_s'] * 1e3:.2f} ms, controller CPU "
            f"{ours['cpu_per_call_s'] * 1e3:.2f} ms/call; Accumulator sum p50 "
            f"{ours['acc_p50_s'] * 1e3:.2f} ms, CPU {ours['acc_cpu_per_call_s'] * 1e3:.2f} "
            "ms/call")


def against(ours: dict, theirs: dict | None) -> str:
    """torchmonarch's figures of the same run and its ratios to ours (or why none)."""
    if theirs is None:
        return "; torchmonarch not run (not importable, or past BENCH_SCALE_MONARCH_MAX)"
    if "error" in theirs:
        return f"; torchmonarch failed: {theirs['error']}"
    return (f"; torchmonarch: spawn {theirs['spawn_s']:.2f} s "
            f"({theirs['spawn_s'] / ours['spawn_s']:.1f}x), p50 {theirs['p50_s'] * 1e3:.2f} ms "
            f"({theirs['p50_s'] / ours['p50_s']:.1f}x), p99 {theirs['p99_s'] * 1e3:.2f} ms, "
            f"CPU {theirs['cpu_per_call_s'] * 1e3:.2f} ms/call "
            f"({theirs['cpu_per_call_s'] / ours['cpu_per_call_s']:.1f}x), sum p50 "
            f"{theirs['acc_p50_s'] * 1e3:.2f} ms "
            f"({theirs['acc_p50_s'] / ours['acc_p50_s']:.1f}x)")


def record(row: dict) -> None:
    """Append ``row`` to ``MONARCH_CY_BENCH_JSON`` when it is set."""
    out = os.environ.get("MONARCH_CY_BENCH_JSON")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


def _plot() -> None:
    path = os.environ.get("BENCH_SCALE_PLOT")
    if path and RESULTS:
        plot(RESULTS, path, "procs (one actor each)")


def plot(results: dict, path: str, xlabel: str) -> None:
    """Cost against mesh size, one line per system (matplotlib PNG at ``path``)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = [("spawn_s", "spawn (s)", 1), ("p50_s", "cast+gather p50 (ms)", 1e3),
            ("cpu_per_call_s", "controller CPU per cast+gather (ms)", 1e3),
            ("acc_cpu_per_call_s", "controller CPU per Accumulator sum (ms)", 1e3)]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for ax, (key, label, scale) in zip(axes, keys):
        for system, by_n in results.items():
            pts = sorted((n, r[key] * scale) for n, r in by_n.items() if "error" not in r)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=system)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
