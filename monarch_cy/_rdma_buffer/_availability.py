"""``get_rdma_backend()``, ``is_rdma_available()``, ``is_ibverbs_available()``."""

from __future__ import annotations

from monarch_cy._rdma_buffer import _select, _verbs_backend

__all__ = ["get_rdma_backend", "is_rdma_available", "is_ibverbs_available"]


def is_ibverbs_available() -> bool:
    """Whether this process can use a verbs device (RDMA NIC or soft-RoCE)."""
    return _verbs_backend.available()


def is_rdma_available() -> bool:
    """Whether ``RDMABuffer`` works here: always True (the fallbacks serve every pair).

    Monarch's answers "is ibverbs available"; ask :func:`is_ibverbs_available` for that.
    """
    return True


def get_rdma_backend(buffer=None, local="cpu") -> str:
    """The backend in use.

    Without ``buffer``: the backend for buffers of *other hosts* -- the one forced by
    ``MONARCH_CY_RDMA_BACKEND`` when set, else ``"ibverbs"`` where this process has a
    verbs device, else ``"tcp"`` (Monarch's answers; ours is never ``"none"``).
    With ``buffer`` (an ``RDMABuffer``): the backend a read or write of it from this
    process uses now, with local memory ``local`` (``"cpu"``, ``"gpu"`` or the memory).
    """
    if buffer is not None:
        return buffer.backend_for(local)
    req = _select.requested(None)
    if req != "auto":
        return req
    return "ibverbs" if is_ibverbs_available() else "tcp"
