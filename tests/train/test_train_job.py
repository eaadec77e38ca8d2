"""The training job end to end on CPU procs: loss falls, replicas agree, bad options exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from monarch_cy._train.config import FaultSpec, MachineError, TrainConfig
from monarch_cy._train.controller import TrainingRun

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cli(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "monarch_cy._cli", "train", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("args, message", [
    (["--steps", "0"], "--steps must be a positive integer"),
    (["--procs", "1000"], "--procs must be at most"),
    (["--inject-fault", "rank=7,step=3"], "is not a rank"),
    (["--inject-fault", "step=3"], "fault spec must look like"),
    (["--width", "30", "--heads", "4"], "must be a multiple of --heads"),
    (["--no-such-option"], "unrecognized arguments"),
])
def test_bad_options_exit_2(args, message):
    r = _cli(*args, timeout=60)
    assert r.returncode == 2
    assert message in r.stderr


def test_more_procs_than_gpus_is_refused_unless_cpu():
    """With GPUs present, procs beyond the GPU count would start procs with no device
    (a ``MachineError``: ``monarch-cy train`` exits 3 for it)."""
    with pytest.raises(MachineError, match="more than the 1 GPU"):
        TrainConfig(procs=4).validate(gpus=1)
    with pytest.raises(MachineError, match="more than the 2 GPU"):
        TrainConfig(procs=3, device="gpu").validate(gpus=2)
    TrainConfig(procs=4, device="cpu").validate(gpus=1)
    TrainConfig(procs=4).validate(gpus=0)
    TrainConfig(procs=1).validate(gpus=1)


def test_short_run_learns_and_replicas_agree(tmp_path):
    run = TrainingRun(TrainConfig(procs=2, steps=30, width=64, heads=2, batch=8, block=32,
                                  checkpoint_every=20, progress="none", out_dir=str(tmp_path)))
    s = run.run()
    assert s["steps_completed"] == 30 and s["world_size"] == 2
    assert s["final_loss"] < s["first_loss"] - 0.5
    assert s["replicas_identical"] and len(s["replica_checksums"]) == 2
    assert os.path.exists(tmp_path / "training.png") and os.path.getsize(tmp_path / "training.png") > 10_000
    assert json.loads((tmp_path / "summary.json").read_text())["steps_completed"] == 30
    assert os.path.exists(tmp_path / "checkpoint.pt")


def test_fault_is_survived_and_matches_a_clean_run(tmp_path):
    common = dict(procs=3, steps=24, width=64, heads=2, batch=8, block=32, checkpoint_every=0,
                  progress="none")
    clean = TrainingRun(TrainConfig(**common, out_dir=str(tmp_path / "clean"))).run()
    faulty = TrainingRun(TrainConfig(**common, faults=(FaultSpec(rank=1, step=10),),
                                     out_dir=str(tmp_path / "faulty"))).run()
    assert faulty["steps_completed"] == 24
    assert len(faulty["faults"]) == 1
    f = faulty["faults"][0]
    assert f["ranks"] == [1] and f["resume_step"] == 10 and "RDMABuffer" in f["source"]
    assert faulty["replicas_identical"]
    assert faulty["replica_checksums"] == clean["replica_checksums"]       # same run, exactly
    assert abs(faulty["final_loss"] - clean["final_loss"]) < 1e-4
    print(f"recovery took {f['recovery_s']:.2f} s")
