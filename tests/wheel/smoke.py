"""Smoke test of an installed monarch_cy wheel, run by tests/test_wheel.py inside a chroot
that has Python but no C compiler.  Prints one JSON line; exits non-zero on any failure.

Checks: the package imports from the venv (not a source tree) without loading any GPU
library; ``monarch-cy info --json`` runs; a 4-proc CPU mesh answers a call; an
RDMABuffer is read one-sidedly by another proc; ``monarch-cy train`` runs a few steps.
"""

import json
import os
import subprocess
import sys

import numpy as np

import monarch_cy
from monarch_cy.actor import Actor, endpoint, this_host
from monarch_cy.rdma import RDMABuffer

out = {"file": monarch_cy.__file__, "version": monarch_cy.__version__}
maps = open("/proc/self/maps").read()
out["gpu_libs_mapped"] = [n for n in ("libcudart", "libamdhip64", "libnccl", "librccl", "libibverbs")
                          if n in maps]


class Holder(Actor):
    def __init__(self):
        self.data = np.arange(1 << 16, dtype=np.int64)
        self.buf = RDMABuffer(memoryview(self.data).cast("B"))

    @endpoint
    def handle(self):
        return self.buf

    @endpoint
    def rank(self):
        return int(os.environ["MONARCH_CY_RANK"])


class Reader(Actor):
    @endpoint
    def pull(self, holder):
        buf = holder.handle.call_one().get()
        local = np.zeros(1 << 16, dtype=np.int64)
        buf.read_into(memoryview(local).cast("B")).get()
        return int(local.sum())


procs = this_host().spawn_procs(per_host={"procs": 4})
holders = procs.spawn("h", Holder)
out["ranks"] = sorted(holders.rank.call().get().values())
reader = procs.slice(procs=1).spawn("r", Reader)
out["rdma_sum"] = reader.pull.call_one(holders.slice(procs=0)).get()
procs.stop().get()

info = subprocess.run([sys.executable, "-m", "monarch_cy", "info", "--json"],
                      capture_output=True, text=True, timeout=120)
out["info_rc"] = info.returncode
if info.returncode == 0:
    gpu = json.loads(info.stdout)["gpu"]
    out["info_gpu"] = {k: gpu.get(k) for k in ("bound", "library", "devices", "error")}
train = subprocess.run([os.path.join(os.path.dirname(sys.executable), "monarch-cy"), "train",
                        "--steps", "6", "--procs", "2", "--checkpoint-every", "0", "--progress",
                        "none", "--json", "--out", "/tmp/train_out"],
                       capture_output=True, text=True, timeout=600)
out["train_rc"] = train.returncode
out["train_tail"] = (train.stdout + train.stderr)[-600:]
if train.returncode == 0:
    summary = json.loads(train.stdout)
    out["train_steps"] = summary.get("steps_completed")
print(json.dumps(out))
