"""Actors for the RDMABuffer tests (importable by the worker procs)."""

from __future__ import annotations

import os

import numpy as np

from monarch_cy.actor import Actor, endpoint
from monarch_cy.rdma import RDMAAction, RDMABuffer, get_rdma_backend


def pattern(n: int, seed: int) -> np.ndarray:
    return ((np.arange(n, dtype=np.uint64) * 2654435761 + seed) >> 7).astype(np.uint8)


class Holder(Actor):
    """Owns arrays and hands out RDMABuffers over them."""

    def __init__(self):
        self.arrays = {}

    @endpoint
    def make(self, name: str, n: int, seed: int, kind: str = "numpy"):
        a = pattern(n, seed)
        self.arrays[name] = a
        if kind == "torch":
            import torch
            return RDMABuffer(torch.from_numpy(a))
        if kind == "cuda":
            import torch
            self.arrays[name] = t = torch.from_numpy(a).cuda()
            torch.cuda.synchronize()
            return RDMABuffer(t)
        if kind == "memoryview":
            return RDMABuffer(memoryview(a))
        return RDMABuffer(a)

    @endpoint
    def digest(self, name: str) -> bytes:
        a = self.arrays[name]
        if hasattr(a, "cpu"):
            import torch
            torch.cuda.synchronize()
            return a.cpu().numpy().tobytes()
        return a.tobytes()

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def drop_all(self, bufs) -> None:
        for b in bufs:
            b.drop().get()

    @endpoint
    def die(self) -> None:
        os._exit(3)


class Reader(Actor):
    """Reads and writes buffers of other procs."""

    @endpoint
    def read(self, buf, n: int | None = None, offset: int = 0, backend=None,
             timeout: float = 30.0, on: str = "cpu") -> bytes:
        dst = np.zeros(n if n is not None else buf.size() - offset, np.uint8)
        if on == "cuda":
            import torch
            t = torch.from_numpy(dst).cuda()
            got = buf.read_into(t, offset, timeout=timeout, backend=backend).get()
            dst = t.cpu().numpy()
        else:
            got = buf.read_into(dst, offset, timeout=timeout, backend=backend).get()
        assert got is None, got               # Monarch's futures resolve to None
        return dst.tobytes()

    @endpoint
    def write(self, buf, data: bytes, offset: int = 0, backend=None, on: str = "cpu") -> None:
        src = np.frombuffer(data, np.uint8).copy()
        if on == "cuda":
            import torch
            src = torch.from_numpy(src).cuda()
            torch.cuda.synchronize()
        buf.write_from(src, offset, backend=backend).get()

    @endpoint
    def backend(self, buf, backend=None, on: str = "cpu") -> str:
        return buf.backend_for("gpu" if on == "cuda" else "cpu", backend)

    @endpoint
    def default_backend(self) -> str:
        return get_rdma_backend()

    @endpoint
    def batch(self, reads, writes, backend=None) -> list:
        """``reads``: buffers to read whole; ``writes``: (buffer, bytes). One submission."""
        act = RDMAAction()
        dsts = []
        for b in reads:
            d = np.zeros(b.size(), np.uint8)
            dsts.append(d)
            act.read_into(b, d)
        for b, data in writes:
            act.write_from(b, np.frombuffer(data, np.uint8).copy())
        assert act.submit(backend=backend).get(timeout=30) is None
        return [d.tobytes() for d in dsts]

    @endpoint
    def read_error(self, buf, backend=None, timeout: float = 20.0):
        """Read and return the exception (type name, message, isinstance checks)."""
        from monarch_cy.actor import SupervisionError
        dst = np.zeros(buf.size(), np.uint8)
        try:
            buf.read_into(dst, timeout=timeout, backend=backend).get()
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e), isinstance(e, SupervisionError)
        return None

    @endpoint
    def read_with_eperm(self, buf) -> tuple:
        """Read with the kernel refusing cross-memory attach (EPERM simulated)."""
        from monarch_cy._rdma_buffer import _cma
        real = _cma._copy

        def refuse(*a, **k):
            raise PermissionError(1, "simulated EPERM")
        _cma._copy = refuse
        try:
            before = buf.backend_for("cpu")
            dst = np.zeros(buf.size(), np.uint8)
            buf.read_into(dst).get(timeout=30)
            after = buf.backend_for("cpu")
            forced = None
            try:
                buf.read_into(dst, backend="cma").get(timeout=30)
            except Exception as e:  # noqa: BLE001
                forced = type(e).__name__
        finally:
            _cma._copy = real
        return before, after, dst.tobytes(), forced


class Staller(Holder):
    """A holder whose RDMA service can be made to stop answering."""

    @endpoint
    def stall(self) -> None:
        import time
        from monarch_cy._rdma_buffer import _owner
        _owner.OwnerService._handle = lambda self, req: time.sleep(3600)
