"""``monarch-cy train``: argument parsing, the printed summary and the exit code.

The summary (text, or one JSON document with ``--json``) is the only thing written
to the result stream (stdout, :func:`monarch_cy._cli.result_stream`); progress and
errors go to stderr.  Exit codes: 0 the run finished and the replicas agree; 1 the
run raised, or finished with replicas that differ; 2 a bad option value; 3 options
this machine cannot satisfy (:class:`~monarch_cy._train.config.MachineError`);
130 interrupted (the summary so far is still printed).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from monarch_cy._cli_common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_MACHINE,
    EXIT_OK,
    EXIT_USAGE,
    HelpFormatter,
)
from monarch_cy._train.config import MAX_PROCS, FaultSpec, MachineError, TrainConfig


def add_parser(sub, epilog: str | None = None) -> argparse.ArgumentParser:
    """Add ``train`` to the subparsers ``sub``; every option has help and shows its default."""
    p = sub.add_parser(
        "train",
        help="train a char-GPT data-parallel over a mesh, surviving injected faults",
        description="Spawn a mesh (one proc per GPU, else N CPU procs), train a small GPT-style "
                    "character model data-parallel with gradients all-reduced through monarch_cy's "
                    "collectives, survive killed workers, and write summary.json and training.png.",
        epilog=epilog, formatter_class=HelpFormatter,
    )
    d = TrainConfig()
    p.add_argument("--procs", type=int, default=None,
                   help=f"number of procs, 1 to {MAX_PROCS} (default: one per GPU when GPUs are used, else 4)")
    p.add_argument("--steps", type=int, default=d.steps, help="training steps (positive)")
    p.add_argument("--batch", type=int, default=d.batch, help="sequences per replica per step")
    p.add_argument("--block", type=int, default=d.block, help="context length, in characters")
    p.add_argument("--layers", type=int, default=d.layers, help="transformer blocks")
    p.add_argument("--heads", type=int, default=d.heads, help="attention heads per block; must divide --width")
    p.add_argument("--width", type=int, default=d.width, help="model width (embedding size)")
    p.add_argument("--lr", type=float, default=d.lr, help="AdamW learning rate, in (0, 1)")
    p.add_argument("--seed", type=int, default=d.seed,
                   help="seed (>= 0) of the text, the batches and the initial weights; equal seeds train "
                        "identically")
    p.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every,
                   help="write a checkpoint every N steps; 0 = never")
    p.add_argument("--inject-fault", action="append", default=[], metavar="rank=R,step=S",
                   help="SIGKILL rank R's proc when step S starts (repeatable); 'auto': the last "
                        "rank at a third of the run (default: no faults)")
    p.add_argument("--out", default=d.out_dir, help="folder for summary.json, training.png, checkpoints")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default=d.device,
                   help="auto: one proc per GPU when GPUs are found, else CPU procs; gpu: GPUs or "
                        "exit 3; cpu: CPU procs even when there are GPUs")
    p.add_argument("--progress", choices=("auto", "bar", "lines", "none"), default=d.progress,
                   help="progress on stderr: a bar, a line every 10 steps, or nothing; auto: a bar "
                        "when stderr is a terminal, else lines")
    p.add_argument("--threads", type=int, default=d.threads,
                   help="torch threads per CPU proc; 0 = CPU cores // procs")
    p.add_argument("--json", action="store_true",
                   help="print the summary as one JSON document on stdout; everything else "
                        "(progress, logs, worker output) goes to stderr")
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


def run_command(args: argparse.Namespace, out: TextIO) -> int:
    """Run the job for parsed ``args``, print its summary to ``out``; return the exit code."""
    from monarch_cy._train.controller import TrainingRun

    try:
        cfg = config_from_args(args)
        run = TrainingRun(cfg)
    except MachineError as e:
        print(f"monarch-cy train: error: {e}", file=sys.stderr)
        return EXIT_MACHINE
    except ValueError as e:
        print(f"monarch-cy train: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        summary = run.run()
    except Exception as e:  # noqa: BLE001 - reported, exit non-zero
        print(f"monarch-cy train: failed: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_FAILED
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary), file=out)
    if summary["interrupted"]:
        return EXIT_INTERRUPTED
    if not summary["replicas_identical"]:
        print("monarch-cy train: failed: the replicas' checksums differ at the end "
              f"({summary['replica_checksums']})", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
