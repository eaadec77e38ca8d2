"""Shared-memory segments for large out-of-band buffers between procs of one host.

Sender side (:class:`ShmPool`): a buffer is copied once into a pooled ``memfd``
segment, and the message carries ``(pid, fd, seg_id, nbytes)``.  The segment is
*owned by the sender*; it counts one reference per receiver and becomes reusable
(warm pages, no fresh page faults) when every receiver has released it.  Nothing is
ever created under ``/dev/shm``: a memfd lives only as long as the fds and mappings
on it, so a crash leaks nothing.

Receiver side (:func:`open_segment`): maps the segment through
``/proc/<pid>/fd/<fd>`` without copying and returns a writable memoryview.  When the
last object viewing it (numpy array, tensor, memoryview) is freed, a finalizer calls
``release(owner, seg_id)``, which the node turns into a RELEASE message to the
owner.  The owner also drops the references of a receiver that died.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref

__all__ = ["ShmPool", "open_segment", "SHM_THRESHOLD"]

SHM_THRESHOLD = 256 * 1024      # buffers at least this large go through shm
_MIN_SEG = 1 << 20
_POOL_KEEP_BYTES = 1 << 30      # free segments beyond this are closed


class _Segment:
    __slots__ = ("seg_id", "fd", "size", "map", "view", "holders", "refs")

    def __init__(self, seg_id: int, size: int) -> None:
        self.seg_id = seg_id
        self.size = size
        # Named after its owner, so /proc/<pid>/maps tells whose segment a mapping is.
        self.fd = os.memfd_create(f"monarch_cy-{os.getpid()}-{seg_id}", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            try:
                os.posix_fallocate(self.fd, 0, size)
            except OSError as e:
                raise MemoryError(f"cannot reserve {size} bytes of shared memory for a "
                                  f"message buffer: {e}") from None
            self.map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise
        self.view = memoryview(self.map)
        self.holders = {}   # receiver key -> count
        self.refs = 0

    def close(self) -> None:
        self.view.release()
        self.map.close()
        os.close(self.fd)


class ShmPool:
    """Pool of memfd segments owned by this process. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._segs = {}
        self._free = []
        self._next = 0
        self._pid = os.getpid()

    def put(self, mv: memoryview, receivers) -> tuple:
        """Copy ``mv`` into a segment referenced once per receiver key; return its desc."""
        n = mv.nbytes
        with self._lock:
            seg = None
            best = None
            for i, s in enumerate(self._free):
                if s.size >= n and (best is None or s.size < self._free[best].size):
                    best = i
            if best is not None:
                seg = self._free.pop(best)
            else:
                size = max(_MIN_SEG, 1 << (n - 1).bit_length())
                self._next += 1
                seg = _Segment(self._next, size)
                self._segs[seg.seg_id] = seg
            for r in receivers:
                seg.holders[r] = seg.holders.get(r, 0) + 1
                seg.refs += 1
        seg.view[:n] = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
        return (self._pid, seg.fd, seg.seg_id, n)

    def release(self, seg_id: int, receiver) -> None:
        with self._lock:
            seg = self._segs.get(seg_id)
            if seg is None or seg.holders.get(receiver, 0) <= 0:
                return
            seg.holders[receiver] -= 1
            seg.refs -= 1
            if seg.refs == 0:
                seg.holders.clear()
                self._reuse(seg)

    def drop_receiver(self, receiver) -> None:
        """A receiver died: drop every reference it held."""
        with self._lock:
            for seg in list(self._segs.values()):
                c = seg.holders.pop(receiver, 0)
                if c:
                    seg.refs -= c
                    if seg.refs == 0:
                        self._reuse(seg)

    def _reuse(self, seg) -> None:
        self._free.append(seg)
        self._trim(_POOL_KEEP_BYTES)

    def _trim(self, keep_bytes: int) -> None:
        total = sum(s.size for s in self._free)
        while total > keep_bytes and self._free:
            s = self._free.pop(0)
            total -= s.size
            del self._segs[s.seg_id]
            s.close()

    def trim(self, keep_bytes: int = 0) -> None:
        """Close free segments, oldest first, until at most ``keep_bytes`` stay pooled
        (segments in use are untouched)."""
        with self._lock:
            self._trim(keep_bytes)

    def in_use(self) -> int:
        with self._lock:
            return sum(1 for s in self._segs.values() if s.refs)

    def close(self) -> None:
        """Close every segment (receivers' existing mappings stay valid)."""
        with self._lock:
            for s in self._segs.values():
                try:
                    s.close()
                except Exception:
                    pass
            self._segs.clear()
            self._free.clear()


def open_segment(desc, on_release, owner) -> memoryview:
    """Map a segment described by ``desc``; ``on_release(owner, seg_id)`` runs once
    when the last view of it is gone."""
    pid, fd, seg_id, n = desc
    f = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR)
    try:
        mm = mmap.mmap(f, max(n, 1))
    finally:
        os.close(f)
    weakref.finalize(mm, on_release, owner, seg_id)
    return memoryview(mm)[:n]
