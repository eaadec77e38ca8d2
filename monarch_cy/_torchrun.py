"""The torchrun environment: the variables ``torchrun`` gives each worker, with its
meanings, so that a script written for ``torchrun`` runs unchanged in a proc.

One home for their names and meanings (``spawn_procs`` sets them in every proc;
:mod:`monarch_cy.spmd` re-sets the master address when asked).  A *node* is a host
of the mesh: ``LOCAL_RANK`` is a proc's index among the mesh's procs on its host,
``LOCAL_WORLD_SIZE`` their number, ``GROUP_RANK`` the host's index; there is one
role, named ``default`` as torchrun names it, so ``ROLE_RANK == RANK``.
``TORCHELASTIC_RESTART_COUNT`` counts this rank's respawns, and
``TORCHELASTIC_USE_AGENT_STORE`` is ``False``: there is no elastic agent hosting
a store, so ``init_process_group("env://")`` starts its own on rank 0 at
``MASTER_ADDR:MASTER_PORT``.  Nothing here sets ``OMP_NUM_THREADS``
(torchrun sets it to 1 for several workers per node; set it through
``spawn_procs(env=...)`` where that matters).
"""

from __future__ import annotations

import socket

__all__ = ["TORCHRUN_VARIABLES", "torchrun_env", "free_local_port"]

TORCHRUN_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR",
    "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
)


def torchrun_env(rank: int, world_size: int, local_world_size: int, master_addr: str,
                 master_port: int, *, run_id: str, restart_count: int = 0,
                 max_restarts: int = 0) -> dict[str, str]:
    """The torchrun variables of global rank ``rank`` when every host runs
    ``local_world_size`` of the ``world_size`` procs, hosts in rank order."""
    if not 0 <= rank < world_size or local_world_size < 1 or world_size % local_world_size:
        raise ValueError(f"rank {rank} of {world_size} with {local_world_size} per "
                         "host is not a valid layout")
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(rank % local_world_size),
        "LOCAL_WORLD_SIZE": str(local_world_size),
        "GROUP_RANK": str(rank // local_world_size),
        "GROUP_WORLD_SIZE": str(world_size // local_world_size),
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world_size),
        "ROLE_NAME": "default",
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "TORCHELASTIC_RUN_ID": run_id,
        "TORCHELASTIC_RESTART_COUNT": str(restart_count),
        "TORCHELASTIC_MAX_RESTARTS": str(max_restarts),
        "TORCHELASTIC_USE_AGENT_STORE": "False",
    }


def free_local_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (as torchrun's standalone mode picks one: it
    may be taken before rank 0 binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
