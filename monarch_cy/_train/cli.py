"""``monarch-cy train`` argument parsing and the printed summary."""

from __future__ import annotations

import argparse
import json
import sys

from monarch_cy._train.config import FaultSpec, TrainConfig


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "train",
        help="train a char-GPT data-parallel over a mesh, surviving injected faults",
        description="Spawn a mesh (one proc per GPU, else N CPU procs), train a small GPT-style "
                    "character model data-parallel with gradients all-reduced through monarch_cy's "
                    "collectives, survive killed workers, and write summary.json and training.png.",
    )
    d = TrainConfig()
    p.add_argument("--procs", type=int, default=None, help="procs (default: one per GPU, else 4)")
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch", type=int, default=d.batch, help="sequences per replica per step")
    p.add_argument("--block", type=int, default=d.block, help="context length")
    p.add_argument("--layers", type=int, default=d.layers)
    p.add_argument("--heads", type=int, default=d.heads)
    p.add_argument("--width", type=int, default=d.width, help="model width")
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every, help="steps; 0 = never")
    p.add_argument("--inject-fault", action="append", default=[], metavar="rank=R,step=S",
                   help="SIGKILL rank R's proc when step S starts (repeatable); 'auto': the last "
                        "rank at a third of the run")
    p.add_argument("--out", default=d.out_dir, help="folder for summary.json, training.png, checkpoints")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default=d.device)
    p.add_argument("--progress", choices=("auto", "bar", "lines", "none"), default=d.progress)
    p.add_argument("--threads", type=int, default=d.threads, help="torch threads per CPU proc (0: auto)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run_command)
    return p


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        procs=args.procs, steps=args.steps, batch=args.batch, block=args.block, layers=args.layers,
        heads=args.heads, width=args.width, lr=args.lr, seed=args.seed,
        checkpoint_every=args.checkpoint_every,
        faults=tuple(FaultSpec.parse(f) for f in args.inject_fault),
        out_dir=args.out, device=args.device, progress=args.progress, threads=args.threads,
    )


def format_summary(s: dict) -> str:
    lines = [
        f"trained {s['steps_completed']} steps on {s['world_size']} {s['device']} procs "
        f"({s['parameters']:,} parameters per replica)",
        f"loss {s['first_loss']:.3f} -> {s['final_loss']:.3f} (mean of the last 10 steps)",
        f"throughput {s['tokens_per_s']:,.0f} tokens/s, {s['steps_per_s']:.2f} steps/s; "
        f"controller overhead {s['controller_overhead_ms_per_step']:.2f} ms/step; set-up {s['setup_s']:.1f} s",
    ]
    for f in s["faults"]:
        lines.append(f"fault at step {f['step']}: rank(s) {f['ranks']} killed, back in {f['recovery_s']:.2f} s, "
                     f"state from {f['source']}")
    ident = "identical" if s["replicas_identical"] else "DIFFERENT"
    lines.append(f"replicas {ident} (sha256 of weights and optimizer state)")
    if s.get("sample"):
        lines.append(f"sample: {s['sample']!r}")
    lines.append(f"wrote {s['summary_path']}" + (f" and {s['plot_path']}" if s.get("plot_path") else ""))
    return "\n".join(lines)


def run_command(args: argparse.Namespace) -> int:
    from monarch_cy._train.controller import TrainingRun

    try:
        cfg = config_from_args(args)
        run = TrainingRun(cfg)
    except ValueError as e:
        print(f"monarch-cy train: error: {e}", file=sys.stderr)
        return 2
    try:
        summary = run.run()
    except Exception as e:  # noqa: BLE001 - reported, exit non-zero
        print(f"monarch-cy train: failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    if summary["interrupted"]:
        return 130
    return 0 if summary["replicas_identical"] else 1
