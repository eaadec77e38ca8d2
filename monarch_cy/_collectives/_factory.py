"""``make_group``: one call per rank, whatever the backend (what the mesh layer uses).

The controller picks the backend and the rendezvous once (``"nccl"``: rank 0
or any process with NCCL calls ``UniqueId.generate()``; ``"gloo"``:
``TcpRendezvous(host, pick_free_port(host))`` with ``host`` reachable from
every rank and rank 0 running on it), sends the same value to every rank, and
each rank calls ``make_group(backend, rank, world_size, rendezvous)``.
"""

from __future__ import annotations

from typing import Any

from monarch_cy._checks import is_int
from monarch_cy._collectives._group import Group
from monarch_cy._collectives._rendezvous import TcpRendezvous, UniqueId

__all__ = ["make_group", "BACKENDS", "default_backend"]

BACKENDS = ("nccl", "gloo")


def default_backend() -> str:
    """``"nccl"`` where a GPU and NCCL/RCCL are usable in this process, else ``"gloo"``."""
    try:
        from monarch_cy._collectives._nccl_loader import ensure_loaded
        from monarch_cy.gpu import device_count

        ensure_loaded()
        return "nccl" if device_count() > 0 else "gloo"
    except Exception:  # noqa: BLE001 - anything missing means CPU
        return "gloo"


def make_group(
    backend: str,
    rank: int,
    world_size: int,
    rendezvous: UniqueId | TcpRendezvous | tuple[str, int],
    *,
    device: Any = None,
    timeout: float = 300.0,
    check: bool = False,
) -> Group:
    """This rank's member of a new group; blocks until all ``world_size`` ranks joined.

    ``rendezvous`` is a :class:`UniqueId` for ``"nccl"`` and a
    :class:`TcpRendezvous` (or a ``(host, port)`` tuple) for ``"gloo"``.
    ``device`` (NCCL only) defaults to the current device.
    """
    if not is_int(world_size) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1 (a group over an empty slice is not a group), got {world_size!r}")
    if backend == "nccl":
        if not isinstance(rendezvous, UniqueId):
            raise TypeError(f"rendezvous for backend 'nccl' must be a UniqueId, got {type(rendezvous).__name__}")
        from monarch_cy._collectives._nccl_comm import NcclCommunicator

        return NcclCommunicator(rank, world_size, rendezvous, device=device, timeout=timeout, check=check)
    if backend == "gloo":
        if isinstance(rendezvous, tuple) and len(rendezvous) == 2:
            rendezvous = TcpRendezvous(*rendezvous)
        if not isinstance(rendezvous, TcpRendezvous):
            raise TypeError(
                f"rendezvous for backend 'gloo' must be a TcpRendezvous or (host, port), got {type(rendezvous).__name__}"
            )
        if device is not None:
            raise ValueError(f"device must be None for backend 'gloo' (CPU), got {device!r}")
        from monarch_cy._collectives._gloo import GlooGroup

        return GlooGroup(rank, world_size, rendezvous.host, rendezvous.port, timeout=timeout, check=check)
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
