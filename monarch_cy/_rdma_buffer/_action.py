"""``RDMAAction``: several reads and writes, checked together, submitted at once.

Build with ``read_into(buffer, dst)`` and ``write_from(buffer, src)`` (Monarch's
names and argument order; ``read_remote(dst, buffer)`` / ``write_remote(buffer,
src)`` are the same with Monarch's newer order), then ``submit()`` for one Future
of None resolved when every operation is done (or failed with the first error).
``submit`` can be called again to run the same work again.

Checks when an operation is added: each as ``RDMABuffer.read_into``/``write_from``
with offset 0 (sizes, contiguity, dropped handle), and local memory ranges may
overlap only when neither operation writes them (two ``write_from`` may share a
source; a ``read_into`` destination overlapping anything is ``ValueError``, as the
result would depend on ordering).  Monarch refuses overlaps involving a
``write_from`` instead; ours refuses the overlaps that are actual races.

Execution: one engine submission; operations on buffers of one owner run in the
order added, owners in parallel (see :mod:`._engine`).
"""

from __future__ import annotations

from monarch_cy._rdma_buffer import _engine, _target
from monarch_cy._rdma_buffer._buffer import DEFAULT_TIMEOUT, RDMABuffer

__all__ = ["RDMAAction"]


class RDMAAction:
    """A batch of RDMA operations (module docstring)."""

    def __init__(self) -> None:
        self._ops: list = []          # (read, buffer, local)
        self._ranges: list = []       # (start, end, writes_local, device)

    def __len__(self) -> int:
        return len(self._ops)

    def _add(self, read: bool, buf, local, pname: str) -> "RDMAAction":
        if not isinstance(buf, RDMABuffer):
            raise TypeError(f"{pname} must be an RDMABuffer, got {type(buf).__name__}")
        t = buf._transfer(read, local, 0)     # validates now
        start, end = t.span.addr, t.span.addr + t.nbytes
        for (s, e, w, dev) in self._ranges:
            if dev == t.span.device and start < e and s < end and (w or read):
                raise ValueError(
                    f"local memory [{start:#x}, {end:#x}) overlaps [{s:#x}, {e:#x}) of an "
                    "earlier operation in this RDMAAction and one of them writes it "
                    "(read_into); the result would depend on ordering")
        self._ranges.append((start, end, read, t.span.device))
        self._ops.append((read, buf, local))
        return self

    def read_into(self, src: RDMABuffer, dst) -> "RDMAAction":
        """Queue a read of all of ``src`` into ``dst``."""
        return self._add(True, src, dst, "src")

    def write_from(self, dst: RDMABuffer, src) -> "RDMAAction":
        """Queue a write of all of ``src`` (local memory) into buffer ``dst``."""
        return self._add(False, dst, src, "dst")

    def read_remote(self, dst, src: RDMABuffer) -> "RDMAAction":
        return self.read_into(src, dst)

    def write_remote(self, dst: RDMABuffer, src) -> "RDMAAction":
        return self.write_from(dst, src)

    def submit(self, *, timeout: float = DEFAULT_TIMEOUT, backend: str | None = None):
        """Run every queued operation; a Future of None (see the module docstring).
        A malformed ``rdma_ibverbs_target`` raises ``RdmaInitError`` here, even for an
        empty batch (Monarch's)."""
        _target.check()
        transfers = [buf._transfer(read, local, 0) for read, buf, local in self._ops]
        fut = _engine.submit(transfers, timeout, backend)
        return _none(fut)


def _none(fut):
    from monarch_cy._actor.base.future import Future
    out = Future._make(None)

    def done(f):
        if f._exc is not None:
            out._set_exception(f._exc)
        else:
            out._set_result(None)
    fut._add_callback(done)
    return out
