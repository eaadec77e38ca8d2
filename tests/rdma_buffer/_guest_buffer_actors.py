"""Actors of the guest's ``RDMABuffer`` checks (``guest_rdma_buffer.py``).

Importable by the worker procs (the controller's ``sys.path`` travels to them).
One actor class, :class:`Peer`, plays both roles: it owns arrays and hands out
``RDMABuffer`` handles over them, and it reads and writes other processes'
buffers.  Data comes back as SHA-256 digests, never as the bytes, so the actor
transport carries no bulk data and the only path the bytes can take is the one
forced by ``backend=``.
"""

from __future__ import annotations

import hashlib
import os
import time

import numpy as np

from monarch_cy.actor import Actor, endpoint
from monarch_cy.rdma import RDMAAction, RDMABuffer


def pattern(n: int, seed: int) -> np.ndarray:
    """``n`` bytes, different for each seed: a 4099-byte random block repeated (a prime
    length, so no two offsets that differ by a power of two see the same bytes)."""
    block = np.random.default_rng(seed).integers(0, 256, 4099, dtype=np.uint8)
    return np.resize(block, n)


def sha(data) -> str:
    return hashlib.sha256(memoryview(data).cast("B")).hexdigest()


class Peer(Actor):
    """Owns arrays (``make``) and reads and writes other processes' buffers."""

    def __init__(self):
        self.arrays: dict[str, object] = {}

    @endpoint
    def device(self) -> dict:
        """The verbs device this process's ibverbs backend uses, and what chose it."""
        from monarch_cy._rdma_buffer import _verbs_backend
        return {"device": _verbs_backend.device_name(), "pid": os.getpid(),
                "env": os.environ.get("MONARCH_CY_RDMA_DEVICE")}

    @endpoint
    def make(self, name: str, n: int, seed: int, kind: str = "numpy") -> RDMABuffer:
        a = pattern(n, seed)
        if kind == "torch":
            import torch
            a = torch.from_numpy(a)
        self.arrays[name] = a
        return RDMABuffer(a)

    @endpoint
    def digest(self, name: str) -> str:
        a = self.arrays[name]
        return sha(a.numpy() if hasattr(a, "numpy") else a)

    @endpoint
    def forget(self, name: str) -> None:
        self.arrays.pop(name, None)

    @endpoint
    def read(self, buf, offset: int = 0, backend: str = "ibverbs",
             timeout: float = 60.0) -> tuple[int, str, float]:
        """Read ``buf[offset:]``; ``(bytes read, digest, seconds)``."""
        dst = np.zeros(buf.size() - offset, np.uint8)
        t = time.monotonic()
        got = buf.read_into(dst, offset, timeout=timeout, backend=backend).get()
        assert got is None, got          # Monarch's read_into resolves to None
        return dst.nbytes, sha(dst), time.monotonic() - t

    @endpoint
    def write(self, buf, n: int, seed: int, offset: int = 0, backend: str = "ibverbs",
              timeout: float = 60.0) -> float:
        """Write ``pattern(n, seed)`` at ``offset``; seconds taken."""
        src = pattern(n, seed)
        t = time.monotonic()
        buf.write_from(src, offset, timeout=timeout, backend=backend).get()
        return time.monotonic() - t

    @endpoint
    def batch(self, reads, writes, backend: str = "ibverbs") -> list[str]:
        """One ``RDMAAction``: read each of ``reads`` whole, write ``(buf, n, seed)`` of
        ``writes``; the digests of what was read."""
        act = RDMAAction()
        dsts = []
        for b in reads:
            d = np.zeros(b.size(), np.uint8)
            dsts.append(d)
            act.read_into(b, d)
        for b, n, seed in writes:
            act.write_from(b, pattern(n, seed))
        assert act.submit(timeout=60, backend=backend).get(timeout=90) is None
        return [sha(d) for d in dsts]

    @endpoint
    def error(self, buf, op: str = "read", backend: str = "ibverbs",
              timeout: float = 30.0) -> tuple | None:
        """Run ``op`` (read/write) expecting it to fail: ``(type name, message, is a
        SupervisionError, seconds)``; None if it succeeded."""
        from monarch_cy.actor import SupervisionError
        t = time.monotonic()
        try:
            if op == "read":
                buf.read_into(np.zeros(buf.size(), np.uint8), timeout=timeout,
                              backend=backend).get()
            else:
                buf.write_from(np.zeros(buf.size(), np.uint8), timeout=timeout,
                               backend=backend).get()
        except Exception as e:  # noqa: BLE001 - the error is the result
            return type(e).__name__, str(e), isinstance(e, SupervisionError), \
                time.monotonic() - t
        return None

    @endpoint
    def queue_pair(self, owner_key: str) -> int | None:
        """The number of this process's live queue pair to ``owner_key`` (None: none)."""
        from monarch_cy._rdma_buffer import _verbs_backend
        return _verbs_backend.queue_pair_num(owner_key)

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def proc_key(self) -> str:
        from monarch_cy._rdma_buffer._identity import this_proc_key
        return this_proc_key()

    @endpoint
    def peers(self) -> list:
        """Owner side: the readers this process holds a queue pair for."""
        from monarch_cy._rdma_buffer import _verbs_backend
        return _verbs_backend.peers()

    @endpoint
    def die(self) -> None:
        os._exit(3)
