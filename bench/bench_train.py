"""Training steps/s: ``monarch-cy train`` against torchrun + DDP, same model and batch, same run.

Both run the same char-GPT, data and per-replica batch with the same number of
procs (4 CPU procs with gloo here; one per GPU with NCCL where GPUs exist).  Our
figure counts the steps after warm-up from the controller's own step timings;
torchrun's from rank 0's clock after a barrier.  Target: >= 0.95 x torchrun.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from monarch_cy._train.config import TrainConfig
from monarch_cy._train.controller import TrainingRun, _gpu_count

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS, WARMUP, CPU_PROCS = 40, 10, 4


def _torchrun_steps_per_s(nproc: int) -> float:
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not found next to this Python")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run(
        [torchrun, "--standalone", f"--nproc_per_node={nproc}", os.path.join(HERE, "_ddp_reference.py"),
         f"--steps={STEPS}", f"--warmup={WARMUP}"],
        capture_output=True, text=True, timeout=900, env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1]
    return json.loads(line)["steps_per_s"]


def test_train_steps_per_s_vs_torchrun_ddp(benchmark):
    out = tempfile.mkdtemp(prefix="mcy-bench-train-")
    try:
        # One proc per GPU where GPUs exist (procs=None), else 4 CPU procs.
        gpus = _gpu_count()
        run = TrainingRun(TrainConfig(procs=None if gpus else CPU_PROCS, steps=STEPS, checkpoint_every=0,
                                      progress="none", out_dir=out))
        summary = benchmark.pedantic(run.run, rounds=1, iterations=1)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    walls = [h["wall_s"] for h in run.history[WARMUP:]]
    print("\nstep walls (ms):", [round(w * 1000) for w in walls])
    ours = len(walls) / sum(walls)
    theirs = _torchrun_steps_per_s(run.world)
    overhead = summary["controller_overhead_ms_per_step"]
    print(f"\nmonarch-cy train: {ours:.2f} steps/s; torchrun DDP: {theirs:.2f} steps/s; "
          f"ratio {ours / theirs:.3f} (target >= 0.95); controller overhead {overhead:.2f} ms/step; "
          f"{run.world} {'GPU' if run.use_gpus else 'CPU'} procs")
    benchmark.extra_info.update(ours_steps_per_s=ours, torchrun_steps_per_s=theirs, ratio=ours / theirs,
                                controller_overhead_ms=overhead)
