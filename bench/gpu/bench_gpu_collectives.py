"""Collective bus bandwidth on GPUs: monarch_cy's ``NcclCommunicator`` against ``torch.distributed`` NCCL.

Same GPUs, same processes, same run, same buffers.  One worker process per GPU
(``MCY_BENCH_NGPUS`` to use fewer; on one GPU nranks = 1 still runs and measures
the local path, where NCCL does no communication).  Every process this file
starts gets ``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and
``NVSHMEM_DISABLE_NVLS=1`` (forced, whatever the caller's environment says; each
worker checks them and reports them back).

Each worker imports torch first, so monarch_cy's loader reuses the NCCL that
torch mapped (the binding and torch's NCCL version are printed: they should be
the same library).  Contenders, both on ``cuda:<rank>``:

* ours:   ``make_group("nccl", rank, n, unique_id, device=rank)`` (rank 0's
  ``UniqueId.generate()`` sent to the others), ops with ``async_op=True`` on
  torch's current stream;
* anchor: ``torch.distributed.init_process_group("nccl")``, ``dist.all_reduce``,
  ``dist.all_gather_into_tensor``, ``dist.reduce_scatter_tensor`` with
  ``async_op=True``.

Ops: all_reduce (sum, in place), all_gather, reduce_scatter (sum), float32, at
1, 4, 16, 64, 256 MiB, 1 and 4 GiB; "size" is the all_reduce buffer, all_gather's
whole output, reduce_scatter's whole input (as in nccl-tests).  A size is skipped
(and listed) when ``size x (1 + 1/n)`` plus 2 GiB does not fit in the smallest
free GPU memory of all ranks.  ``MCY_BENCH_MAX_BYTES`` lowers the ceiling.

Timing (host wall clock, so it counts everything a user waits for: launch,
device, completion check): per (op, size), 5 rounds alternate ours / torch.  A
round: ``torch.cuda.synchronize()``, a barrier on a separate gloo CPU group (the
same for both contenders, independent of either), ``t0``; launch ``iters`` ops
back to back; wait for the last one (ours: ``Work.wait()``, which also checks
``ncclCommGetAsyncError``; torch: ``Work.wait()``) and ``torch.cuda.synchronize()``;
``t1``.  Ours' other ``Work`` objects are released (their events destroyed)
after ``t1``: the device had finished them.  ``iters`` gives ~32 GiB of payload
per round, 10..500 ops.  Time per op = (t1 - t0) / iters of the slowest rank
(max over ranks, gathered outside the timed region); the median over rounds is
reported.  algbw = size / time; busbw = algbw x 2(n-1)/n (all_reduce) or
x (n-1)/n (all_gather, reduce_scatter), as nccl-tests.  With n = 1 the bus
factor is 0, so algbw is compared instead.  After timing each size, one op per
contender on known values (rank + 1) is checked at both ends of the result.

Ratios (ours / torch, > 1 means monarch_cy is faster) go through ``_ratios.record``
and print at the end; target >= 0.98 at >= 64 MiB with n > 1, "report" elsewhere.

Run on a GPU machine (skips without a GPU, bench/gpu/conftest.py):

    PYTHONPATH=. python -m pytest bench/gpu/bench_gpu_collectives.py -s -p no:cacheprovider

Dry run on the CPU (the same workers, timing, formulas and printing, with gloo:
monarch_cy's ``GlooGroup`` vs torch gloo, 2 processes, small sizes; proves the
harness, not NCCL):

    PYTHONPATH=. python bench/gpu/bench_gpu_collectives.py --dry-run
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))  # _ratios, when run as a script or a worker

from _ratios import RATIOS, record  # noqa: E402

FORCED_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
MiB, GiB = 1 << 20, 1 << 30
SIZES = [1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1 * GiB, 4 * GiB]
DRY_SIZES = [64 << 10, 1 * MiB, 4 * MiB]
OPS = ("all_reduce", "all_gather", "reduce_scatter")
ROUNDS = 5
HEADROOM = 2 * GiB
TARGET_BYTES = 64 * MiB
HOST = "127.0.0.1"


def iters_for(size: int, dry: bool) -> int:
    if dry:
        return max(2, min(50, (8 * MiB) // size))
    return max(10, min(500, (32 * GiB) // size))


def bus_factor(op: str, n: int) -> float:
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def fits(size: int, n: int, free_bytes: int, cap: int | None) -> bool:
    """Whether the largest pair of buffers for ``size`` (size + size/n) plus headroom fits."""
    if cap is not None and size > cap:
        return False
    return size + size // n + HEADROOM <= free_bytes


# --------------------------------------------------------------------------- worker
def _worker(rank: int, world: int, port: int, dry: bool, sizes: list[int], out: str) -> None:
    for k, v in FORCED_ENV.items():
        if os.environ.get(k) != v:
            raise RuntimeError(f"{k} must be {v!r} in every benchmark process, found {os.environ.get(k)!r}")
    import datetime

    import torch  # first: monarch_cy's loader then reuses torch's NCCL
    import torch.distributed as dist

    from monarch_cy.collectives import TcpRendezvous, UniqueId, make_group, pick_free_port

    timeout = datetime.timedelta(seconds=300)
    if dry:
        dev = torch.device("cpu")
        sync = lambda: None  # noqa: E731
        dist.init_process_group("gloo", init_method=f"tcp://{HOST}:{port}", rank=rank, world_size=world, timeout=timeout)
    else:
        dev = torch.device("cuda", rank)
        torch.cuda.set_device(dev)
        sync = torch.cuda.synchronize
        dist.init_process_group("nccl", init_method=f"tcp://{HOST}:{port}", rank=rank, world_size=world, timeout=timeout)
    cpu = dist.new_group(backend="gloo")  # barriers, rendezvous and timing gathers: neither contender

    box = [None]
    if rank == 0:
        box[0] = TcpRendezvous(HOST, pick_free_port(HOST)) if dry else UniqueId.generate()
    dist.broadcast_object_list(box, src=0, group=cpu)
    if dry:
        g = make_group("gloo", rank, world, box[0], timeout=300)
    else:
        g = make_group("nccl", rank, world, box[0], device=rank, timeout=300)

    info = {"world": world, "dry": dry, "env": {k: os.environ.get(k) for k in FORCED_ENV}, "torch": torch.__version__}
    if not dry:
        from monarch_cy._collectives._nccl_loader import current

        b = current()
        info.update(device=torch.cuda.get_device_name(dev), ours_nccl=f"{b.library} {b.version_text} ({b.source}: {b.path})",
                    torch_nccl=".".join(map(str, torch.cuda.nccl.version())), nonblocking=g.nonblocking)

    def reduce_max(x: float) -> float:
        t = torch.tensor([x], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=cpu)
        return t.item()

    free = torch.cuda.mem_get_info(dev)[0] if not dry else 1 << 62
    free = int(-reduce_max(-float(free)))  # the smallest over ranks
    cap = int(os.environ["MCY_BENCH_MAX_BYTES"]) if os.environ.get("MCY_BENCH_MAX_BYTES") else None

    # Warm both: torch creates its communicator lazily on the first collective.
    w = torch.ones(1024, device=dev)
    dist.all_reduce(w)
    g.all_reduce(w)
    sync()

    def make(op: str, size: int):
        """Buffers and one launch per contender; each launch returns its Work."""
        n = size // 4
        if op == "all_reduce":
            t = torch.zeros(n, device=dev)
            return (t,), (lambda: g.all_reduce(t, async_op=True)), (lambda: dist.all_reduce(t, async_op=True))
        if op == "all_gather":
            o, i = torch.zeros(n, device=dev), torch.zeros(n // world, device=dev)
            return (o, i), (lambda: g.all_gather(o, i, async_op=True)), (lambda: dist.all_gather_into_tensor(o, i, async_op=True))
        o, i = torch.zeros(n // world, device=dev), torch.zeros(n, device=dev)
        return (o, i), (lambda: g.reduce_scatter(o, i, async_op=True)), (lambda: dist.reduce_scatter_tensor(o, i, async_op=True))

    def timed(launch, iters: int) -> float:
        sync()
        dist.barrier(group=cpu)
        t0 = time.perf_counter()
        works = [launch() for _ in range(iters)]
        works[-1].wait()
        sync()
        t1 = time.perf_counter()
        for wk in works:  # ours: release each op's event (already complete); torch: no-op
            wk.wait()
        return reduce_max((t1 - t0) / iters)

    def check(op: str, bufs, launch) -> list:
        """One op on rank + 1 everywhere: [got, want] at both ends of the result."""
        for b in bufs:
            b.fill_(rank + 1)
        launch().wait()
        sync()
        res = bufs[0]
        if op == "all_gather":
            want = [1.0, float(world)]
        else:
            want = [world * (world + 1) / 2] * 2
        got = [res[0].item(), res[-1].item()]
        for b in bufs:
            b.zero_()
        return [got, want]

    rows, skipped = [], []
    for op in OPS:
        for size in sizes:
            if not fits(size, world, free, cap):
                skipped.append([op, size])
                continue
            bufs, ours, theirs = make(op, size)
            iters = iters_for(size, dry)
            fns = {"ours": ours, "torch": theirs}
            for name in ("ours", "torch"):
                for _ in range(3):
                    fns[name]().wait()
            times = {"ours": [], "torch": []}
            for r in range(ROUNDS if not dry else 3):
                for name in (("ours", "torch") if r % 2 == 0 else ("torch", "ours")):
                    times[name].append(timed(fns[name], iters))
            checks = {name: check(op, bufs, fns[name]) for name in ("ours", "torch")}
            rows.append({"op": op, "size": size, "iters": iters, "world": world,
                         "ours_s": statistics.median(times["ours"]), "torch_s": statistics.median(times["torch"]),
                         "ours_all": times["ours"], "torch_all": times["torch"], "checks": checks})
            del bufs, ours, theirs, fns
            if not dry:
                torch.cuda.empty_cache()
    g.close()
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"info": info, "rows": rows, "skipped": skipped}, f)


# --------------------------------------------------------------------------- controller
def run_workers(out_dir: Path, world: int, dry: bool, sizes: list[int], timeout: float = 1500) -> dict:
    """Start one worker per GPU (or ``world`` CPU workers with ``dry``); rank 0's results."""
    from monarch_cy.collectives import pick_free_port

    out = out_dir / "collectives.json"
    port = pick_free_port(HOST)
    env = dict(os.environ, **FORCED_ENV)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    if dry:
        env["OMP_NUM_THREADS"] = "1"
    size_arg = ",".join(map(str, sizes))
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r), str(world), str(port),
                               "dry" if dry else "gpu", size_arg, str(out)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(world)]
    logs: list[str] = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=timeout)[0].decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    bad = [(r, p.returncode, logs[r][-3000:] if r < len(logs) else "") for r, p in enumerate(procs) if p.returncode]
    if bad:
        raise RuntimeError(f"worker failures: {bad}")
    return json.loads(out.read_text())


def _fmt(n: int) -> str:
    for unit, s in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << s:
            return f"{n >> s} {unit}"
    return f"{n} B"


def report(res: dict) -> list[str]:
    """Record one ratio per row (bus bandwidth, or algbw when n = 1) and return the table's lines."""
    info, rows = res["info"], res["rows"]
    n = info["world"]
    what = "algbw" if n == 1 else "busbw"
    lines = [f"collectives, {n} rank(s): " + json.dumps(info),
             f"{'op':<15}{'size':>9} {'iters':>6} {'ours us':>11} {'torch us':>11} {'ours ' + what:>12} "
             f"{'torch ' + what:>12} {'ratio':>7}  (GB/s; ratio = ours/torch)"]
    for r in rows:
        factor = 1.0 if n == 1 else bus_factor(r["op"], n)
        ours = r["size"] / r["ours_s"] / 1e9 * factor
        theirs = r["size"] / r["torch_s"] / 1e9 * factor
        lines.append(f"{r['op']:<15}{_fmt(r['size']):>9} {r['iters']:>6} {r['ours_s'] * 1e6:>11.1f} "
                     f"{r['torch_s'] * 1e6:>11.1f} {ours:>12.2f} {theirs:>12.2f} {ours / theirs:>7.3f}")
        target = ">= 0.98" if (n > 1 and r["size"] >= TARGET_BYTES and not info["dry"]) else "report"
        record(f"{r['op']} {_fmt(r['size'])} {what} n={n}", ours, "torch.distributed " + ("gloo" if info["dry"] else "NCCL"),
               theirs, "GB/s", target)
    if res["skipped"]:
        lines.append("skipped (GPU memory or MCY_BENCH_MAX_BYTES): "
                     + ", ".join(f"{op} {_fmt(s)}" for op, s in res["skipped"]))
    return lines


def wrong_results(res: dict) -> list:
    return [(r["op"], r["size"], name, c) for r in res["rows"] for name, c in r["checks"].items() if c[0] != c[1]]


try:
    import pytest

    _long = pytest.mark.timeout(1800)  # the whole sweep; pyproject's default is 300 s
except ImportError:  # a worker or the dry run without pytest
    def _long(f):
        return f


@_long
def test_collectives_bus_bandwidth_vs_torch(benchmark, tmp_path):
    import pytest

    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA/ROCm device")
    n = torch.cuda.device_count()
    if os.environ.get("MCY_BENCH_NGPUS"):
        n = min(n, int(os.environ["MCY_BENCH_NGPUS"]))
    res = benchmark.pedantic(lambda: run_workers(tmp_path, n, False, SIZES), rounds=1, iterations=1)
    lines = report(res)
    print("\n" + "\n".join(lines))
    benchmark.extra_info.update(info=res["info"], skipped=res["skipped"])
    for r in res["rows"]:
        benchmark.extra_info[f"{r['op']} {_fmt(r['size'])} ratio"] = r["torch_s"] / r["ours_s"]
    assert not wrong_results(res), wrong_results(res)
    assert res["info"]["env"] == FORCED_ENV
    assert res["rows"], f"no size fitted: {res['skipped']}"


def _dry_run(world: int) -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        t0 = time.monotonic()
        res = run_workers(Path(d), world, True, DRY_SIZES, timeout=300)
        took = time.monotonic() - t0
    print("\n".join(report(res)))
    print("\nratios (as bench/gpu/conftest.py prints them):")
    for r in RATIOS:
        print(f"{r['workload']:<44} ours {r['ours']:>10.3f} {r['unit']:<6} {r['anchor']:<22} "
              f"{r['anchor_value']:>10.3f}  ratio {r['ratio']:.3f}  (target {r['target']})")
    bad = wrong_results(res)
    print(f"\ndry run: {len(res['rows'])} rows in {took:.1f} s; wrong results: {bad or 'none'}; env {res['info']['env']}")
    return 1 if bad or res["info"]["env"] != FORCED_ENV else 0


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "--worker":
        _, _, r, w, p, mode, sizes, out = sys.argv
        _worker(int(r), int(w), int(p), mode == "dry", [int(s) for s in sizes.split(",")], out)
    elif len(sys.argv) >= 2 and sys.argv[1] == "--dry-run":
        sys.exit(_dry_run(int(sys.argv[2]) if len(sys.argv) > 2 else 2))
    else:
        sys.exit("usage: pytest bench/gpu/bench_gpu_collectives.py -s  |  python bench/gpu/bench_gpu_collectives.py --dry-run [WORLD]")
