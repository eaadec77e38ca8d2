"""Bringing a training run back after replicas died (see controller.py, steps 1-4).

What happens to the step in flight: the failed ``step`` call raises in the
controller; survivors either finished their forward/backward and failed in the
all-reduce (the dead peer's sockets reset), or never started.  Neither applied
the update, so every survivor is at the end of ``step - 1``.  This is checked
(``at_step``) before anything else: survivors that disagree, or no survivor at
all, make recovery fall back to the last checkpoint.
"""

from __future__ import annotations

import time


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _dead_ranks(run, error: BaseException) -> list[int]:
    """Ranks whose proc is gone: by their pid, and the one the error names."""
    deadline = time.monotonic() + 5.0
    named = getattr(error, "rank", None)
    while True:
        dead = sorted(r for r, pid in run.pids.items() if not _alive(pid))
        if dead or time.monotonic() > deadline:
            break
        time.sleep(0.02)   # the error can outrun the kernel's reaping of the proc
    if isinstance(named, int) and named in run.pids and named not in dead and not dead:
        dead = [named]
    return dead


def recover(run, step: int, error: BaseException) -> dict:
    """Respawn dead replicas, rebuild the group, restore state; returns what was done.

    ``info["resume_step"]`` is where the loop continues: ``step`` when state came
    from a healthy peer, the checkpoint's step otherwise.
    """
    from monarch_cy.collectives import create_group  # noqa: F401 - used via run._new_group

    dead = _dead_ranks(run, error)
    if not dead:
        raise RuntimeError(f"step {step} failed but every replica is alive: {error!r}") from error
    dim = run._dim()
    survivors = [r for r in range(run.world) if r not in dead]
    survivor_steps = {}
    for r in survivors:
        survivor_steps[r] = run.trainers.slice(**{dim: r}).at_step.call_one().get(timeout=120)

    run.procs.respawn(dead).get(timeout=300)
    ids = run.trainers.identity.call().get(timeout=300)
    run.pids = {i["rank"]: i["pid"] for i in ids.values()}
    run._new_group()

    info = {"ranks": dead, "error": f"{type(error).__name__}: {error}"}
    if survivors and len(set(survivor_steps.values())) == 1 and survivor_steps[survivors[0]] == step:
        src = survivors[0]
        peer = run.trainers.slice(**{dim: src})
        exported = peer.export_state.call_one().get(timeout=120)
        backends = set()
        try:
            for r in dead:
                got, backend = run.trainers.slice(**{dim: r}).import_state.call_one(exported).get(timeout=300)
                if got != step:
                    raise RuntimeError(f"rank {r} restored to step {got}, expected {step}")
                backends.add(backend)
        finally:
            peer.release_exports.call_one().get(timeout=60)
        info.update(source=f"peer rank {src} via RDMABuffer ({', '.join(sorted(backends))})",
                    resume_step=step)
    elif run.last_checkpoint is not None:
        ck_step, path = run.last_checkpoint
        run.trainers.load_checkpoint.call(path).get(timeout=300)
        info.update(source=f"checkpoint at step {ck_step}", resume_step=ck_step,
                    steps_lost=step - ck_step)
        del run.history[ck_step:]
    else:
        raise RuntimeError(
            f"cannot recover from the failure at step {step}: no healthy peer "
            f"(survivors at steps {survivor_steps}) and no checkpoint yet") from error
    sums = run.trainers.checksum.call().get(timeout=120)
    if len(set(sums.values())) != 1:
        raise RuntimeError(f"replicas differ after recovery: {dict((p.rank, c[:12]) for p, c in sums.items())}")
    return info
