"""gloo collectives on the CPU: monarch_cy's ``GlooGroup`` against plain ``torch.distributed``, same run.

Workload: 4 real processes on this machine (loopback TCP).  Each process makes
both contenders at the start and keeps them for the whole run:

* ours:   ``make_group("gloo", rank, 4, (host, port))`` -> ``GlooGroup``
* anchor: ``torch.distributed.init_process_group("gloo", ...)``, then
  ``dist.all_reduce`` / ``dist.all_gather_into_tensor`` / ``dist.reduce_scatter_tensor``
  (the list forms ``dist.all_gather`` / ``dist.reduce_scatter`` where this torch's
  gloo lacks the tensor forms; the anchor actually used is printed).

Ops and sizes: all_reduce, all_gather, reduce_scatter of float32 at 1 KiB, 16 KiB,
256 KiB, 4 MiB, 64 MiB.  "size" is the all_reduce buffer, all_gather's whole
output, reduce_scatter's whole input (as in nccl-tests).

Timing: per (op, size), rounds alternate ours / torch so that load drift on this
shared 2-core machine hits both alike.  A round is: the contender's own barrier,
then ``iters`` back-to-back blocking ops timed with ``perf_counter``; the round's
time per op is the slowest rank's (max over ranks, gathered outside the timed
region).  Reported: the median over rounds.  Time ratio = torch / ours (> 1: ours
faster); bandwidths as nccl-tests define them: algbw = size / time, busbw = algbw x
2(n-1)/n for all_reduce, x (n-1)/n for all_gather and reduce_scatter, so the
bandwidth ratio ours / torch equals the time ratio.  After timing each size, one
op per contender on known values (rank + 1) is checked on both ends of the buffer.

monarch_cy's reduce_scatter on gloo is an all_reduce of a copy of the input plus
a local copy (see ``GlooGroup.reduce_scatter``): expect it to trail torch's native
reduce_scatter where torch has one.

Run (about 1 minute on the 2-core CI machine):

    PYTHONPATH=. python -m pytest bench/bench_collectives.py -s -p no:cacheprovider

``MONARCH_CY_BENCH_JSON=/path`` also writes the rows as JSON.  ``benchmark`` times
the whole 4-process run once (start to results); the figures are in ``extra_info``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORLD = 4
SIZES = [1 << 10, 16 << 10, 256 << 10, 4 << 20, 64 << 20]
OPS = ("all_reduce", "all_gather", "reduce_scatter")
HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]


def _iters(size: int) -> int:
    """Ops per timed round: about 2 MiB of payload per round, 3..50 ops (small ops cost ~5 ms here)."""
    return max(3, min(50, (2 << 20) // size))


def _rounds(size: int) -> int:
    return 3 if size >= (64 << 20) else 5


def _bus_factor(op: str, n: int) -> float:
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


# --------------------------------------------------------------------------- worker
def _worker(rank: int, world: int, port_ours: int, port_torch: int, out: str) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    from monarch_cy.collectives import make_group

    torch.set_num_threads(1)
    g = make_group("gloo", rank, world, (HOST, port_ours), timeout=120)
    dist.init_process_group("gloo", init_method=f"tcp://{HOST}:{port_torch}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))

    def slowest(seconds: float) -> float:
        t = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    # Which tensor-form anchors does this torch's gloo have?  Same answer on every rank.
    anchors = {"all_reduce": "dist.all_reduce"}
    probe_in, probe_out = torch.zeros(world), torch.zeros(world * world)
    try:
        dist.all_gather_into_tensor(probe_out, probe_in)
        anchors["all_gather"] = "dist.all_gather_into_tensor"
    except Exception:  # noqa: BLE001 - older gloo: the list form
        anchors["all_gather"] = "dist.all_gather (list)"
    try:
        dist.reduce_scatter_tensor(probe_in[:1], probe_in)
        anchors["reduce_scatter"] = "dist.reduce_scatter_tensor"
    except Exception:  # noqa: BLE001
        anchors["reduce_scatter"] = "dist.reduce_scatter (list)"
    dist.barrier()

    def make(op: str, size: int):
        n = size // 4
        if op == "all_reduce":
            t = torch.zeros(n)
            return (t,), lambda: g.all_reduce(t), lambda: dist.all_reduce(t)
        if op == "all_gather":
            o, i = torch.zeros(n), torch.zeros(n // world)
            chunks = list(o.chunk(world))
            if anchors["all_gather"].endswith("(list)"):
                theirs = lambda: dist.all_gather(chunks, i)  # noqa: E731
            else:
                theirs = lambda: dist.all_gather_into_tensor(o, i)  # noqa: E731
            return (o, i), lambda: g.all_gather(o, i), theirs
        o, i = torch.zeros(n // world), torch.zeros(n)
        if anchors["reduce_scatter"].endswith("(list)"):
            parts = list(i.chunk(world))
            theirs = lambda: dist.reduce_scatter(o, parts)  # noqa: E731
        else:
            theirs = lambda: dist.reduce_scatter_tensor(o, i)  # noqa: E731
        return (o, i), lambda: g.reduce_scatter(o, i), theirs

    def check(op: str, bufs, fn) -> bool:
        """One op on known values; both ends of the result checked."""
        if op == "all_reduce":
            (t,) = bufs
            t.fill_(rank + 1)
            fn()
            want = [world * (world + 1) / 2] * 2
            got = [t[0].item(), t[-1].item()]
            t.zero_()
        elif op == "all_gather":
            o, i = bufs
            i.fill_(rank + 1)
            fn()
            want, got = [1.0, float(world)], [o[0].item(), o[-1].item()]
            o.zero_(); i.zero_()
        else:
            o, i = bufs
            i.fill_(rank + 1)
            fn()
            want, got = [world * (world + 1) / 2] * 2, [o[0].item(), o[-1].item()]
            o.zero_(); i.zero_()
        return got == want

    rows = []
    for op in OPS:
        for size in SIZES:
            bufs, ours, theirs = make(op, size)
            iters, rounds = _iters(size), _rounds(size)
            times = {"ours": [], "torch": []}
            barrier = {"ours": g.barrier, "torch": dist.barrier}
            fns = {"ours": ours, "torch": theirs}
            for name in ("ours", "torch"):  # warm: connections, buffers, first-touch
                fns[name]()
            for r in range(rounds):
                order = ("ours", "torch") if r % 2 == 0 else ("torch", "ours")
                for name in order:
                    barrier[name]()
                    t0 = time.perf_counter()
                    for _ in range(iters):
                        fns[name]()
                    dt = (time.perf_counter() - t0) / iters
                    times[name].append(slowest(dt))
            ok = {name: check(op, bufs, fns[name]) for name in ("ours", "torch")}
            rows.append({"op": op, "size": size, "iters": iters, "rounds": rounds, "world": world,
                         "ours_s": statistics.median(times["ours"]), "torch_s": statistics.median(times["torch"]),
                         "ours_all": times["ours"], "torch_all": times["torch"],
                         "anchor": anchors[op], "ok": ok})
            del bufs
    g.close()
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            json.dump(rows, f)


# --------------------------------------------------------------------------- controller
def run_workers(out_dir: Path, world: int = WORLD, timeout: float = 240) -> list[dict]:
    """Start ``world`` worker processes of this file, wait, return rank 0's rows."""
    from monarch_cy.collectives import pick_free_port

    p1, p2 = pick_free_port(HOST), pick_free_port(HOST)
    while p2 == p1:
        p2 = pick_free_port(HOST)
    out = out_dir / "rows.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r), str(world), str(p1), str(p2), str(out)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(world)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=timeout)[0].decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    bad = [(r, p.returncode, logs[r][-1500:] if r < len(logs) else "") for r, p in enumerate(procs) if p.returncode]
    if bad:
        raise RuntimeError(f"worker failures: {bad}")
    return json.loads(out.read_text())


def _fmt_size(n: int) -> str:
    for unit, s in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << s:
            return f"{n >> s} {unit}"
    return f"{n} B"


def table(rows: list[dict]) -> str:
    head = (f"{'op':<15}{'size':>8} {'ours us':>10} {'torch us':>10} {'time ratio':>10}  "
            f"{'ours algbw':>10} {'ours busbw':>10} {'torch busbw':>11} {'bw ratio':>8}  GB/s  anchor")
    lines = [head, "-" * len(head)]
    for r in rows:
        f = _bus_factor(r["op"], r["world"])
        a_ours, a_torch = r["size"] / r["ours_s"] / 1e9, r["size"] / r["torch_s"] / 1e9
        lines.append(
            f"{r['op']:<15}{_fmt_size(r['size']):>8} {r['ours_s'] * 1e6:>10.1f} {r['torch_s'] * 1e6:>10.1f} "
            f"{r['torch_s'] / r['ours_s']:>10.3f}  {a_ours:>10.3f} {a_ours * f:>10.3f} {a_torch * f:>11.3f} "
            f"{a_ours / a_torch:>8.3f}        {r['anchor']}"
        )
    return "\n".join(lines)


def test_gloo_collectives_vs_torch(benchmark, tmp_path):
    rows = benchmark.pedantic(lambda: run_workers(tmp_path), rounds=1, iterations=1)
    print(f"\nmonarch_cy GlooGroup vs torch.distributed gloo, {WORLD} processes, float32 "
          "(time ratio = torch/ours; bw ratio = ours/torch; > 1 means monarch_cy is faster)")
    print(table(rows))
    for r in rows:
        key = f"{r['op']} {_fmt_size(r['size'])}"
        benchmark.extra_info[f"{key} ours us"] = r["ours_s"] * 1e6
        benchmark.extra_info[f"{key} torch us"] = r["torch_s"] * 1e6
        benchmark.extra_info[f"{key} ratio"] = r["torch_s"] / r["ours_s"]
    out = os.environ.get("MONARCH_CY_BENCH_JSON")
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=2)
    assert [(r["op"], r["size"]) for r in rows] == [(o, s) for o in OPS for s in SIZES]
    wrong = [(r["op"], r["size"], r["ok"]) for r in rows if not all(r["ok"].values())]
    assert not wrong, f"wrong results: {wrong}"


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--worker":
        _worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        sys.exit("run with pytest: PYTHONPATH=. python -m pytest bench/bench_collectives.py -s")
