"""What a run leaves behind: progress while it runs, a JSON summary and a PNG plot."""

from __future__ import annotations

import json
import os
import sys
from typing import Any


class Progress:
    """A tqdm bar on a terminal, one line every ``every`` steps otherwise.

    Everything it prints (the bar, step lines, notes) goes to ``sys.stderr``, never
    to stdout: stdout is the run's result (the summary, or ``--json``'s document).
    """

    def __init__(self, total: int, mode: str = "auto", every: int = 10) -> None:
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "lines"
        self.mode, self.every, self.total = mode, every, total
        self._bar = None
        if mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="step", dynamic_ncols=True, file=sys.stderr)

    def update(self, step: int, loss: float, tokens_per_s: float) -> None:
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tokens_per_s:,.0f}")
        elif self.mode == "lines" and (step % self.every == 0 or step == self.total - 1):
            print(f"step {step:5d}/{self.total}  loss {loss:.4f}  {tokens_per_s:,.0f} tokens/s",
                  file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        elif self.mode != "none":
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def write_summary(out_dir: str, summary: dict[str, Any]) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "summary.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
    return path


def write_plot(out_dir: str, history: list[dict], faults: list[dict]) -> str:
    """Loss (left axis) and tokens/s (right axis) per step; faults as red lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    steps = [h["step"] for h in history]
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    ax.plot(steps, [h["loss"] for h in history], color="tab:blue", lw=1.4, label="loss (mean over replicas)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(steps, [h["tokens_per_s"] for h in history], color="tab:green", lw=0.8, alpha=0.6,
             label="tokens/s (all replicas)")
    ax2.set_ylabel("tokens/s", color="tab:green")
    for f in faults:
        ax.axvline(f["step"], color="tab:red", ls="--", lw=1)
        ax.annotate(f"rank(s) {f['ranks']} killed\nback in {f['recovery_s']:.2f} s", (f["step"], ax.get_ylim()[1]),
                    textcoords="offset points", xytext=(4, -24), fontsize=8, color="tab:red")
    ax.set_title("monarch-cy train: data-parallel char-GPT")
    fig.legend(loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path = os.path.join(out_dir, "training.png")
    fig.savefig(path)
    plt.close(fig)
    return path
