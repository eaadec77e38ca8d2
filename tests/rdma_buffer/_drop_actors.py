"""Actors for the drop-in-flight tests (importable by the worker procs).

:class:`Dropper` owns buffers whose registration holds the only reference to their
memory (so ``drop`` frees it), watches its own lease table to drop while a
transfer is on the wire, and then allocates and fills a fresh array of the same
size -- the memory a late write would land in.  :class:`Mover` is a reader that
runs one transfer in the background and reports how it ended.
"""

from __future__ import annotations

import os
import time

import numpy as np

from monarch_cy.actor import Actor, endpoint
from monarch_cy.rdma import RDMABuffer


def _digest(a: np.ndarray) -> tuple:
    return int(a.view(np.uint64).sum(dtype=np.uint64)), int(np.count_nonzero(a))


def _wait_busy(cell: int, timeout: float) -> bool:
    """Wait until some process holds a lease on ``cell`` of this process's table."""
    from monarch_cy._rdma_buffer import _leases
    table = _leases.own().table
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if table.holders(cell):
            return True
        time.sleep(0.0001)
    return False


class Dropper(Actor):
    def __init__(self):
        self.bufs, self.kept, self.fresh = {}, {}, {}

    @endpoint
    def make(self, name: str, n: int, fill: int, keep: bool = False, kind: str = "numpy"):
        a = np.full(n, fill, np.uint8)
        if kind == "torch":
            import torch
            a = torch.empty(n, dtype=torch.uint8).fill_(fill)     # resizable storage
        if keep:
            self.kept[name] = a
        b = self.bufs[name] = RDMABuffer(a)
        return b

    @endpoint
    def drop_in_flight(self, name: str, fresh_fill: int, wait_busy: bool = True) -> dict:
        """Drop ``name`` (once a lease on it is seen, when ``wait_busy``), then fill a
        fresh array of its size.  Reports what it saw."""
        b = self.bufs.pop(name)
        h = b._h
        busy = _wait_busy(h.cell, 5.0) if wait_busy else False
        t0 = time.monotonic()
        b.drop().get(timeout=60)
        t1 = time.monotonic()
        out = {"busy": busy, "drop_s": t1 - t0}
        if name in self.kept:
            out["after_drop"] = _digest(self.kept[name])
        fresh = self.fresh[name] = np.full(h.nbytes, fresh_fill, np.uint8)
        out["fresh_at_old_address"] = fresh.ctypes.data == h.addr
        return out

    @endpoint
    def check(self, name: str, fresh_fill: int) -> dict:
        """Whether the fresh array is untouched; the kept array's digest now."""
        fresh = self.fresh.pop(name)
        out = {"fresh_untouched": bool((fresh == fresh_fill).all())}
        if name in self.kept:
            a = self.kept.pop(name)
            out["now"] = _digest(a)
            out["kept_values"] = sorted(int(v) for v in np.unique(a))
        return out

    @endpoint
    def die_in_flight(self, name: str) -> None:
        """Exit as soon as a lease on ``name`` is seen (a transfer is on the wire)."""
        _wait_busy(self.bufs[name]._h.cell, 5.0)
        os._exit(3)

    @endpoint
    def resize(self, name: str, how: str) -> None:
        t = self.kept[name]
        if how == "grow":
            t.resize_(2 * t.numel())
        else:
            t.untyped_storage().resize_(0)

    @endpoint
    def set_drop_wait(self, seconds: float) -> float:
        from monarch_cy._rdma_buffer import _leases
        old, _leases.DROP_WAIT = _leases.DROP_WAIT, seconds
        return old


class Mover(Actor):
    """Runs one read or write in the background; ``result`` says how it ended."""

    def __init__(self):
        self.fut = None
        self.arrays = {}

    def _array(self, n: int, fill: int) -> np.ndarray:
        a = self.arrays.get((n, fill))
        if a is None:
            a = self.arrays[(n, fill)] = np.full(n, fill, np.uint8)
        return a

    @endpoint
    def start(self, buf, op: str, fill: int = 0, backend=None) -> None:
        if op == "write":
            self.dst = None
            self.fut = buf.write_from(self._array(buf.size(), fill), backend=backend,
                                      timeout=60)
        else:
            self.dst = np.zeros(buf.size(), np.uint8)
            self.fut = buf.read_into(self.dst, backend=backend, timeout=60)

    @endpoint
    def result(self, want: int | None = None) -> dict:
        """``{"error": None | (type, message)}``, and for a read whether every byte
        read is ``want``."""
        fut, self.fut = self.fut, None
        out = {"error": None}
        try:
            fut.get(timeout=60)
        except Exception as e:  # noqa: BLE001 - reported to the test
            out["error"] = (type(e).__name__, str(e), type(e).__mro__[1].__name__)
        if self.dst is not None and out["error"] is None:
            out["all_want"] = bool((self.dst == want).all())
        self.dst = None
        return out

    @endpoint
    def hold_lease_and_die(self, buf) -> None:
        """Claim a lease on ``buf`` (as a copy would) and exit without giving it back."""
        from monarch_cy._rdma_buffer import _leases
        _leases.claim(_leases.remote(buf._h), buf._h)
        os._exit(4)
