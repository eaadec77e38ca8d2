"""Which GPUs a proc sees: the ``gpus`` coordinate indexes the devices *we* were given.

A scheduler or a user restricts a job to some devices by setting, in the
controller's (or a host agent's) environment, one of:

* ``CUDA_VISIBLE_DEVICES`` (NVIDIA; HIP honours it too) or ``HIP_VISIBLE_DEVICES``
  (AMD): a list of device indices, UUIDs or MIG ids.  The proc at ``gpus``
  coordinate ``g`` gets the list's element ``g`` in both variables.
* ``ROCR_VISIBLE_DEVICES`` (AMD, lower level: HIP then numbers the devices it
  leaves ``0..n-1``): kept as it is; the proc gets ``HIP_VISIBLE_DEVICES`` and
  ``CUDA_VISIBLE_DEVICES`` set to ``g``, an index into that subset.
* ``SLURM_STEP_GPUS`` / ``SLURM_JOB_GPUS`` (SLURM's physical indices of the
  allocated GPUs, for clusters without device cgroups where SLURM did not set
  ``CUDA_VISIBLE_DEVICES``): element ``g`` in both variables.

The first of these that is set (in that order) is the source; with none, the
coordinate itself is the device index (every GPU of the machine is ours).  A mesh
whose ``gpus`` dimension is larger than the source's list is refused before
anything starts, with :class:`ValueError` naming the variable, its value and how
many devices it gives.  :func:`assignment` is pure (it reads the environment it
is given), so the controller applies it for local procs and each host agent for
its own, with its own environment.
"""

from __future__ import annotations

__all__ = ["SOURCES", "given", "assignment", "check_enough"]

SOURCES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
           "SLURM_STEP_GPUS", "SLURM_JOB_GPUS")


def given(environ) -> tuple[str, list[str]] | None:
    """``(variable, devices)`` of the first source set in ``environ``, else None."""
    for var in SOURCES:
        value = environ.get(var)
        if value is None:
            continue
        devices = [d.strip() for d in value.split(",") if d.strip()]
        if var.startswith("SLURM_") and not devices:
            continue                        # SLURM sets them empty without GPUs
        return var, devices
    return None


def check_enough(environ, count: int, where: str = "this process") -> None:
    """Refuse a ``gpus`` dimension of ``count`` when fewer devices were given."""
    src = given(environ)
    if src is None:
        return
    var, devices = src
    if count > len(devices):
        raise ValueError(
            f"per_host asks for {count} GPUs ('gpus': {count}), but {where} was given "
            f"{len(devices)} by {var}={environ.get(var)!r}; ask for at most "
            f"{len(devices)}, or name the dimension otherwise (or set "
            f"MONARCH_CY_PIN_GPUS=0) if it does not mean GPUs")


def assignment(environ, g: int) -> dict:
    """The variables to set for the proc at ``gpus`` coordinate ``g``, with
    ``MONARCH_CY_GPU_UNPINNED``: what the two device variables were before (JSON,
    null for unset), for :mod:`monarch_cy.spmd` to restore."""
    import json
    src = given(environ)
    if src is None:
        value = str(g)
    else:
        var, devices = src
        if g >= len(devices):
            raise ValueError(f"gpus coordinate {g} is out of the {len(devices)} GPUs "
                             f"given by {var}={environ.get(var)!r}")
        value = str(g) if var == "ROCR_VISIBLE_DEVICES" else devices[g]
    before = {v: environ.get(v) for v in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")}
    return {"CUDA_VISIBLE_DEVICES": value, "HIP_VISIBLE_DEVICES": value,
            "MONARCH_CY_GPU_UNPINNED": json.dumps(before)}
