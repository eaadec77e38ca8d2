"""A DDP training script written the way a torchrun user writes one.

    torchrun --standalone --nproc_per_node=2 ddp_train.py --steps 20 --out loss.json

Rank 0 writes the final loss (and what the environment said) to ``--out``.
``--fail-rank R`` makes rank R raise on its first attempt
(``TORCHELASTIC_RESTART_COUNT == 0``); ``--exit-rank R`` makes it ``sys.exit(3)`` then.
"""

import argparse
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--fail-rank", type=int, default=-1)
    ap.add_argument("--exit-rank", type=int, default=-1)
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    first_try = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
    if rank == args.fail_rank and first_try:
        raise RuntimeError(f"rank {rank} was told to fail")
    if rank == args.exit_rank and first_try:
        sys.exit(3)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cpu")
    if args.backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)

    torch.manual_seed(0)                       # the same initial weights everywhere
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    ddp = DDP(model, device_ids=[local_rank] if args.backend == "nccl" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1000 + rank)    # each rank its own shard
    w_true = torch.arange(16, dtype=torch.float32) / 16
    loss = None
    for step in range(args.steps):
        x = torch.randn(64, 16, generator=gen)
        y = (x @ w_true).unsqueeze(1)
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        out = nn.functional.mse_loss(ddp(x), y)
        out.backward()
        opt.step()
        total = out.detach().clone()
        dist.all_reduce(total)
        loss = total.item() / world
        if rank == 0 and step % 5 == 0:
            print(f"[rank {rank}] step {step} loss {loss:.6f}", flush=True)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"loss": loss, "world": world, "local_rank": local_rank,
                       "master": os.environ["MASTER_ADDR"]}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
