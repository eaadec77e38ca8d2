"""Monarch's pattern: set up torch.distributed's environment, let the user init it.

:func:`setup_torch_env` writes the variables ``init_process_group`` reads with
its default ``env://`` method, so that code inside an actor can call
``torch.distributed.init_process_group("nccl")`` (RCCL on ROCm builds of torch,
``"gloo"`` on CPUs) with no arguments.  It changes ``os.environ`` of the calling
process only, and returns what it set.
"""

from __future__ import annotations

import os
from typing import Mapping, MutableMapping

from monarch_cy._checks import is_int
from monarch_cy._collectives._group import check_rank

__all__ = ["setup_torch_env", "TORCH_ENV_DEFAULTS"]

# Set only where the user has not set them (their value always wins).
TORCH_ENV_DEFAULTS: Mapping[str, str] = {
    "NCCL_NVLS_ENABLE": "0",  # NVLink multicast stays off on our multi-GPU hosts
}


def setup_torch_env(
    rank: int,
    world_size: int,
    local_rank: int,
    master_addr: str,
    master_port: int,
    *,
    local_world_size: int | None = None,
    environ: MutableMapping[str, str] | None = None,
) -> dict[str, str]:
    """Set ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``
    (and ``LOCAL_WORLD_SIZE`` when given) plus :data:`TORCH_ENV_DEFAULTS` not
    already set; returns every variable it wrote.  ``environ`` defaults to
    ``os.environ``.
    """
    from monarch_cy._collectives._rendezvous import TcpRendezvous

    if not is_int(world_size) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    check_rank(rank, world_size, "rank")
    if not is_int(local_rank) or local_rank < 0:
        raise ValueError(f"local_rank must be an int >= 0, got {local_rank!r}")
    if local_world_size is not None:
        if not is_int(local_world_size) or local_world_size < 1:
            raise ValueError(f"local_world_size must be an int >= 1, got {local_world_size!r}")
        if local_rank >= local_world_size:
            raise ValueError(f"local_rank must be < local_world_size ({local_world_size}), got {local_rank}")
    TcpRendezvous(master_addr, master_port)
    env = os.environ if environ is None else environ
    wrote = {
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(local_rank),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
    }
    if local_world_size is not None:
        wrote["LOCAL_WORLD_SIZE"] = str(local_world_size)
    for k, v in TORCH_ENV_DEFAULTS.items():
        if k not in env:
            wrote[k] = v
    env.update(wrote)
    return wrote
