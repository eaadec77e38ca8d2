"""The controller side of ``monarch-cy train``: spawn, step, survive, report.

The controller owns the loop.  Each step is one ``call`` to every replica; the
replies carry loss, tokens and time.  A fault (a replica's proc dies) surfaces
as an error of that step's call; recovery then:

1. respawns the dead ranks in place (same mesh shape, ``__init__`` re-run);
2. closes the broken collective group everywhere and makes a new one;
3. copies model and optimizer state into each new replica from a healthy peer
   through ``RDMABuffer`` (one-sided reads of the peer's flat buffers), or from
   the last on-disk checkpoint when no peer survived;
4. redoes the failed step.  Survivors never applied it (the update follows the
   all-reduce), so at most that one step's work is lost and the run continues
   exactly as a fault-free one would.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import asdict

from monarch_cy._train.config import TrainConfig
from monarch_cy._train.report import Progress, write_plot, write_summary


def _gpu_count() -> int:
    try:
        from monarch_cy.gpu import device_count

        return device_count()
    except Exception:  # noqa: BLE001 - no runtime, no driver, no device: CPU
        return 0


class TrainingRun:
    """One run of the job; :meth:`run` returns the summary dict."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.gpus = _gpu_count() if cfg.device != "cpu" else 0
        cfg = cfg.resolved(self.gpus)
        cfg.validate(self.gpus)
        self.cfg = cfg
        self.world = cfg.world_size(self.gpus)
        self.use_gpus = cfg.use_gpus(self.gpus)
        self.history: list[dict] = []
        self.faults: list[dict] = []
        self.group_gen = 0
        self.last_checkpoint: tuple[int, str] | None = None
        self.progress = Progress(cfg.steps, cfg.progress)

    # -- set-up
    def _worker_cfg(self) -> dict:
        c = self.cfg
        threads = c.threads or max(1, (os.cpu_count() or 1) // self.world)
        return {"seed": c.seed, "layers": c.layers, "heads": c.heads, "width": c.width,
                "block": c.block, "batch": c.batch, "lr": c.lr, "steps": c.steps,
                "threads": 0 if self.use_gpus else threads}

    def _start(self) -> None:
        from monarch_cy.actor import this_host

        dims = {"gpus": self.world} if self.use_gpus else {"procs": self.world}
        self.procs = this_host().spawn_procs(per_host=dims)
        self.trainers = self.procs.spawn("trainer", _trainer_cls(), self._worker_cfg())
        ids = self.trainers.identity.call().get(timeout=300)
        self.pids = {i["rank"]: i["pid"] for i in ids.values()}
        self.params = next(iter(ids.values()))["params"]
        self._new_group()

    def _new_group(self) -> None:
        from monarch_cy.collectives import create_group

        if self.world == 1:
            return
        self.group_gen += 1
        name = f"train{self.group_gen}"
        create_group(self.procs, name, backend="nccl" if self.use_gpus else "gloo", timeout=120)
        self.trainers.use_group.call(name).get(timeout=60)

    # -- the loop
    def run(self) -> dict:
        """Train to the end; returns the summary.  A replica's death fails the step's
        call, which the run recovers from (respawn in place), so while it runs the
        failures it saw are handled: it opts in to ``fault_hook_skips_seen``
        (restored when it returns) rather than leaving them to the fault hook."""
        import monarch_cy.actor as api  # deferred: the actor runtime loads on use
        before = api.fault_hook_skips_seen
        api.fault_hook_skips_seen = True
        try:
            return self._run()
        finally:
            api.fault_hook_skips_seen = before

    def _run(self) -> dict:
        t_start = time.perf_counter()
        self._start()
        setup_s = time.perf_counter() - t_start
        pending = sorted(self.cfg.faults, key=lambda f: f.step)
        step = 0
        interrupted = False
        try:
            while step < self.cfg.steps:
                while pending and pending[0].step == step:
                    self._inject(pending.pop(0))
                t0 = time.perf_counter()
                try:
                    out = self.trainers.step.call(step).get(timeout=600)
                except Exception as e:  # noqa: BLE001 - a dead replica fails the call
                    step = self._recover(step, e)
                    continue
                self._record(step, out, time.perf_counter() - t0)
                if self.cfg.checkpoint_every and (step + 1) % self.cfg.checkpoint_every == 0:
                    self._checkpoint(step + 1)
                step += 1
        except KeyboardInterrupt:
            interrupted = True
            self.progress.note("interrupted: stopping the mesh and writing the summary so far")
        finally:
            self.progress.close()
        summary = self._finish(setup_s, time.perf_counter() - t_start, interrupted)
        return summary

    def _record(self, step: int, out, wall: float) -> None:
        vals = list(out.values())
        loss = sum(v["loss"] for v in vals) / len(vals)
        tokens = sum(v["tokens"] for v in vals)
        compute = max(v["seconds"] for v in vals)
        self.history.append({"step": step, "loss": loss, "tokens": tokens, "wall_s": wall,
                             "tokens_per_s": tokens / wall, "overhead_s": max(0.0, wall - compute)})
        self.progress.update(step, loss, tokens / wall)

    def _checkpoint(self, step: int) -> None:
        path = os.path.abspath(os.path.join(self.cfg.out_dir, "checkpoint.pt"))
        os.makedirs(self.cfg.out_dir, exist_ok=True)
        self.trainers.slice(**{self._dim(): 0}).save_checkpoint.call_one(path).get(timeout=120)
        self.last_checkpoint = (step, path)

    def _dim(self) -> str:
        return "gpus" if self.use_gpus else "procs"

    # -- faults
    def _inject(self, fault) -> None:
        pid = self.pids[fault.rank]
        self.progress.note(f"injecting fault: SIGKILL rank {fault.rank} (pid {pid}) at step {fault.step}")
        self._fault_started = time.perf_counter()
        os.kill(pid, signal.SIGKILL)

    def _recover(self, step: int, error: BaseException) -> int:
        """Recover and return the step to continue from."""
        from monarch_cy._train.recovery import recover

        t0 = getattr(self, "_fault_started", None) or time.perf_counter()
        self._fault_started = None
        info = recover(self, step, error)
        info.update(step=step, recovery_s=time.perf_counter() - t0)
        self.faults.append(info)
        self.progress.note(f"recovered rank(s) {info['ranks']} in {info['recovery_s']:.2f} s "
                           f"(state from {info['source']}); continuing at step {info['resume_step']}")
        return info["resume_step"]

    # -- the end
    def _finish(self, setup_s: float, total_s: float, interrupted: bool) -> dict:
        checks = {}
        try:
            checks = {p.rank: c for p, c in self.trainers.checksum.call().get(timeout=120).items()}
        except Exception as e:  # noqa: BLE001 - reported in the summary
            checks = {"error": str(e)}
        sample = ""
        try:
            sample = self.trainers.slice(**{self._dim(): 0}).sample.call_one("The ", 60).get(timeout=60)
        except Exception:  # noqa: BLE001
            pass
        try:
            self.procs.stop().get(timeout=60)
        except Exception:  # noqa: BLE001
            pass
        h = self.history
        tail = h[-10:] if h else []
        steady = h[len(h) // 5:] if len(h) >= 5 else h
        summary = {
            "config": {**asdict(self.cfg), "faults": [asdict(f) for f in self.cfg.faults]},
            "world_size": self.world,
            "device": "gpu" if self.use_gpus else "cpu",
            "parameters": self.params,
            "steps_completed": len(h),
            "interrupted": interrupted,
            "final_loss": sum(x["loss"] for x in tail) / len(tail) if tail else None,
            "first_loss": h[0]["loss"] if h else None,
            "tokens_per_s": (sum(x["tokens"] for x in steady) / sum(x["wall_s"] for x in steady)) if steady else 0.0,
            "steps_per_s": (len(steady) / sum(x["wall_s"] for x in steady)) if steady else 0.0,
            "controller_overhead_ms_per_step": 1e3 * sum(x["overhead_s"] for x in steady) / max(1, len(steady)),
            "setup_s": setup_s,
            "total_s": total_s,
            "faults": self.faults,
            "replica_checksums": checks,
            "replicas_identical": len(set(checks.values())) == 1 if "error" not in checks else False,
            "sample": sample,
            "loss_history": [round(x["loss"], 5) for x in h],
        }
        summary["summary_path"] = write_summary(self.cfg.out_dir, summary)
        if h:
            summary["plot_path"] = write_plot(self.cfg.out_dir, h, self.faults)
        return summary


def _trainer_cls():
    from monarch_cy._train.worker import Trainer

    return Trainer


def train(cfg: TrainConfig) -> dict:
    """Run the job described by ``cfg``; returns the summary (also written to disk)."""
    return TrainingRun(cfg).run()
