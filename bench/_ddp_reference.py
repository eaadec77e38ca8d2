"""The anchor for bench_train.py: the same model, data and batch under torchrun + DDP.

Run as ``torchrun --standalone --nproc_per_node N bench/_ddp_reference.py --steps S ...``;
rank 0 prints one JSON line with steps/s over the steps after warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from monarch_cy._train.data import CharDataset
from monarch_cy._train.model import CharGPT, ModelConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    gpu = torch.cuda.is_available()
    dist.init_process_group("nccl" if gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if gpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    else:
        torch.set_num_threads(a.threads or max(1, (os.cpu_count() or 1) // world))
    dev = torch.device("cuda" if gpu else "cpu")
    data = CharDataset(0)
    torch.manual_seed(0)
    model = CharGPT(ModelConfig(data.vocab_size, block=a.block, layers=a.layers, heads=a.heads, width=a.width)).to(dev)
    ddp = DDP(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.01)
    t0 = None
    for step in range(a.steps):
        if step == a.warmup:
            if gpu:
                torch.cuda.synchronize()
            dist.barrier()
            t0 = time.perf_counter()
        x, y = data.batch(step, rank, a.batch, a.block)
        loss = ddp(torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev))
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        loss.item()
    if gpu:
        torch.cuda.synchronize()
    dist.barrier()
    dt = time.perf_counter() - t0
    if rank == 0:
        print(json.dumps({"steps_per_s": (a.steps - a.warmup) / dt, "world": world}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
