"""One rank of the 4-process gloo test: runs every operation, writes results as JSON.

Run as ``python _gloo_worker.py RANK WORLD PORT OUT_DIR``.  Rank 3 exits
abruptly at the end (a peer dying mid-collective); the others record what the
next collective raised and how long it took.
"""

import json
import os
import sys
import time
import traceback

import torch

from monarch_cy.collectives import CollectiveError, CollectiveTimeout, GroupAbortedError, make_group

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16]


def main(rank: int, world: int, port: int, out_dir: str) -> None:
    res: dict = {}
    g = make_group("gloo", rank, world, ("127.0.0.1", port), timeout=20, check=True)
    res["rank_size"] = [g.rank, g.size]
    for dt in DTYPES:
        name = str(dt)
        for op in ("sum", "avg", "max", "min", "prod"):
            t = torch.full((5,), rank + 1, dtype=dt)
            g.all_reduce(t, op)
            res[f"all_reduce/{name}/{op}"] = t.float().tolist()
        t = torch.full((3,), rank * 10, dtype=dt)
        g.broadcast(t, root=2)
        res[f"broadcast/{name}"] = t.float().tolist()
        t = torch.full((3,), rank + 1, dtype=dt)
        g.reduce(t, root=1, op="sum")
        if rank == 1:
            res[f"reduce/{name}"] = t.float().tolist()
        out = torch.empty((world, 2), dtype=dt)
        g.all_gather(out, torch.tensor([rank, rank * 2], dtype=dt))
        res[f"all_gather/{name}"] = out.float().tolist()
        o = torch.empty(2, dtype=dt)
        g.reduce_scatter(o, torch.arange(world * 2, dtype=dt) + rank)
        res[f"reduce_scatter/{name}"] = o.float().tolist()
    # async op + wait
    t = torch.ones(4)
    w = g.all_reduce(t, async_op=True)
    w.wait()
    res["async"] = [t.tolist(), w.is_completed()]
    # send/recv in a ring: even ranks send first
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    buf = torch.empty(3, dtype=torch.int64)
    if rank % 2 == 0:
        g.send(torch.full((3,), rank, dtype=torch.int64), nxt)
        g.recv(buf, prv)
    else:
        g.recv(buf, prv)
        g.send(torch.full((3,), rank, dtype=torch.int64), nxt)
    res["recv"] = buf.tolist()
    g.barrier()
    # mismatch detection (check=True): rank 0 passes a different count
    try:
        g.all_reduce(torch.ones(3 if rank == 0 else 4))
        res["mismatch"] = "no error"
    except ValueError as e:
        res["mismatch"] = str(e)
    # split: even / odd ranks, reversed order by key
    sub = g.split(rank % 2, key=-rank)
    t = torch.tensor([float(rank)])
    sub.all_reduce(t)
    res["split"] = [sub.rank, sub.size, t.item()]
    none = g.split(None if rank == 3 else 0)
    res["split_none"] = none is None
    # made now (split needs all four ranks), used after rank 3 died
    pair = g.split(0 if rank < 2 else None)
    g.barrier()
    sub.close()
    sub.close()
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(res, f)
    # a peer dying mid-collective
    if rank == 3:
        os._exit(0)
    time.sleep(0.2)
    t0 = time.monotonic()
    try:
        g.all_reduce(torch.ones(1 << 16))
        res["dead_peer"] = "no error"
    except CollectiveError as e:
        res["dead_peer"] = [type(e).__name__, round(time.monotonic() - t0, 2), str(e)[:200]]
    res["closed_after"] = g.aborted is not None
    g.close()
    # a stuck peer: in the pair {0, 1}, rank 1 never joins the all_reduce
    if pair is not None:
        pair.timeout = 2.0
        if rank == 0:
            t0 = time.monotonic()
            try:
                pair.all_reduce(torch.ones(2))
                res["stuck"] = "no error"
            except CollectiveTimeout as e:
                res["stuck"] = ["CollectiveTimeout", round(time.monotonic() - t0, 2), str(e)[:120]]
            try:
                pair.all_reduce(torch.ones(2))
            except GroupAbortedError:
                res["after_abort"] = "GroupAbortedError"
        else:
            time.sleep(3)
        pair.close()
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    r, w, p, d = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    try:
        main(r, w, p, d)
    except BaseException:
        with open(os.path.join(d, f"{r}.err"), "w") as f:
            f.write(traceback.format_exc())
        raise
