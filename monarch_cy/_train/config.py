"""Options of the training job, validated, and the fault-injection specs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from monarch_cy._checks import is_int

MAX_PROCS = 64


from monarch_cy._errors import MachineError  # noqa: E402  (re-exported)


@dataclass(frozen=True)
class FaultSpec:
    """SIGKILL the proc of data-parallel ``rank`` when step ``step`` starts."""

    rank: int
    step: int

    @classmethod
    def parse(cls, text: str) -> "FaultSpec":
        """``"rank=1,step=40"`` (either order, spaces allowed), or ``"auto"``: the last
        rank at a third of the run (resolved by :meth:`TrainConfig.resolved`)."""
        if (text or "").strip() == "auto":
            return cls(rank=-1, step=-1)
        m = re.fullmatch(r"\s*(rank|step)\s*=\s*(\d+)\s*,\s*(rank|step)\s*=\s*(\d+)\s*", text or "")
        if not m or m.group(1) == m.group(3):
            raise ValueError(f"fault spec must look like 'rank=1,step=40', got {text!r}")
        vals = {m.group(1): int(m.group(2)), m.group(3): int(m.group(4))}
        return cls(rank=vals["rank"], step=vals["step"])


@dataclass(frozen=True)
class TrainConfig:
    """Everything a run depends on; two runs with equal configs train identically."""

    procs: int | None = None          # None: one per GPU, else 4 CPU procs
    steps: int = 120
    batch: int = 16                   # sequences per replica per step
    block: int = 64
    layers: int = 2
    heads: int = 4
    width: int = 128
    lr: float = 3e-3
    seed: int = 0
    checkpoint_every: int = 50        # 0: never
    faults: tuple[FaultSpec, ...] = field(default_factory=tuple)
    out_dir: str = "monarch_cy_train_out"
    device: str = "auto"              # auto | cpu | gpu
    progress: str = "auto"            # auto | bar | lines | none
    threads: int = 0                  # torch threads per proc; 0: cores // procs

    def resolved(self, gpus: int) -> "TrainConfig":
        """This config with ``auto`` faults made concrete.  With one proc the fault
        kills the only replica, so a checkpoint is taken before it."""
        if not any(f.rank < 0 for f in self.faults):
            return self
        from dataclasses import replace

        n = self.world_size(gpus)
        step = max(1, self.steps // 3)
        faults = tuple(FaultSpec(n - 1, step) if f.rank < 0 else f for f in self.faults)
        ckpt = self.checkpoint_every
        if n == 1 and (ckpt == 0 or ckpt > step):
            ckpt = max(1, step // 2)
        return replace(self, faults=faults, checkpoint_every=ckpt)

    def validate(self, gpus: int) -> None:
        """Raise ``ValueError`` naming the option and its value for anything impossible.

        Options that are wrong on any machine are checked first; then what this
        machine (``gpus`` found) cannot do, as :class:`MachineError`; then the
        fault specs, whose ranks depend on the world size.
        """
        def positive(name):
            v = getattr(self, name)
            if not is_int(v) or v < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {v!r}")

        def non_negative(name):
            v = getattr(self, name)
            if not is_int(v) or v < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be an integer >= 0, got {v!r}")
        for name in ("steps", "batch", "block", "layers", "heads", "width"):
            positive(name)
        if self.procs is not None:
            positive("procs")
            if self.procs > MAX_PROCS:
                raise ValueError(f"--procs must be at most {MAX_PROCS}, got {self.procs}")
        if self.width % self.heads:
            raise ValueError(f"--width ({self.width}) must be a multiple of --heads ({self.heads})")
        if not (0 < self.lr < 1):
            raise ValueError(f"--lr must be in (0, 1), got {self.lr!r}")
        for name in ("checkpoint_every", "seed", "threads"):
            non_negative(name)
        if self.device not in ("auto", "cpu", "gpu"):
            raise ValueError(f"--device must be auto, cpu or gpu, got {self.device!r}")
        if self.progress not in ("auto", "bar", "lines", "none"):
            raise ValueError(f"--progress must be auto, bar, lines or none, got {self.progress!r}")
        if self.device == "gpu" and gpus == 0:
            raise MachineError("--device gpu but no GPU was found (`monarch-cy info` says why; "
                               "--device cpu runs CPU procs instead)")
        if self.procs is not None and self.use_gpus(gpus) and self.procs > gpus:
            raise MachineError(f"--procs {self.procs} is more than the {gpus} GPU(s) found "
                               "(one proc per GPU; --device cpu runs CPU procs instead)")
        n = self.world_size(gpus)
        for f in self.faults:
            if not 0 <= f.rank < n:
                raise ValueError(f"--inject-fault rank={f.rank} is not a rank of the {n} procs")
            if not 0 < f.step < self.steps:
                raise ValueError(f"--inject-fault step={f.step} must be in [1, {self.steps - 1}]")

    def use_gpus(self, gpus: int) -> bool:
        return self.device == "gpu" or (self.device == "auto" and gpus > 0)

    def world_size(self, gpus: int) -> int:
        if self.procs is not None:
            return self.procs
        return gpus if self.use_gpus(gpus) else 4
