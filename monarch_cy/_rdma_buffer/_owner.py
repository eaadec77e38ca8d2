"""The owner side: the per-process registry of buffers and the service serving them.

One :class:`OwnerService` per process, made by the first :class:`RDMABuffer`.  It
holds every registered buffer's memory alive (a strong reference to the tensor or
buffer) until that buffer is dropped -- the registration outlives the Python
``RDMABuffer`` object, because its handle may have been sent to other processes.

It also runs the *service*: a channel (``Channel.open()``) whose port travels in
every handle, read by ``SERVICE_THREADS`` daemon threads.  Requests (tuples) and
what they answer on the requester's reply port with ``(tag, ok, value)``:

* ``("read", buf_id, token, offset, n, reply, tag)`` -> the bytes (out of band: one
  copy into the transport's shared memory within a host; GPU memory is first
  copied to a pinned staging buffer);
* ``("write", buf_id, token, offset, data, reply, tag)`` -> ``n`` once copied in;
* ``("drop", buf_id, token, reply, tag)`` -> ``None`` (idempotent);
* ``("check", buf_id, token, reply, tag)`` -> ``None`` if alive, else the error;
* ``("qp", peer_key, endpoint_bytes, reply, tag)`` -> this side's queue pair
  endpoint (ibverbs backend; see :mod:`._verbs_backend`).

Requests are handled in arrival order per thread; two threads serve chunks in
parallel.  A failing request answers with the exception; the service keeps going.
A service thread copies the buffer's memory under a lease of its own (see
:mod:`._leases`); a ``read`` reply's bytes stay leased until the transport has
sent them (the reply lends them without copying: :class:`~monarch_cy._leases.LeasedView`).

``drop`` blocks: it zeroes the buffer's cell (no operation starts after that),
deregisters its verbs region, then waits for the leases held on it (same-host
readers' cross-memory-attach copies, the service's copies and replies, local
copies) to be given back or their holders' processes to die, at most
``_leases.DROP_WAIT`` seconds.  Only then does the registry let go of the memory
(its reference to the tensor or buffer).  Past the bound, ``drop`` raises
``RDMATimeoutError`` and the memory stays referenced until the leases go; a later
``drop`` or registration in the process frees it then.  Operations that found the
memory moved under a live registration (``resize_()`` of a registered tensor:
:func:`._local.move_guard`) fail with ``RDMAError`` naming the buffer.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import pickle
import threading

from monarch_cy._errors import BufferDroppedError, RDMAError, RDMATimeoutError
from monarch_cy._rdma_buffer import _identity, _leases
from monarch_cy._rdma_buffer._handle import BufferHandle
from monarch_cy._rdma_buffer._local import Span, move_guard

__all__ = ["OwnerService", "service", "SERVICE_THREADS"]

SERVICE_THREADS = 2


class _Entry:
    __slots__ = ("span", "cell", "token", "mr", "handle", "guard", "lock")

    def __init__(self, span, cell, token):
        self.span, self.cell, self.token = span, cell, token
        self.mr = None
        self.handle = None
        self.guard = move_guard(span)
        self.lock = threading.Lock()       # one drop at a time finishes the entry


def host_view(addr: int, n: int) -> memoryview:
    """A writable byte memoryview over ``n`` bytes at ``addr`` (caller keeps it valid)."""
    if n == 0:
        return memoryview(bytearray())
    return memoryview((ctypes.c_char * n).from_address(addr)).cast("B")


class OwnerService:
    """Registry + service of this process (see the module docstring)."""

    def __init__(self) -> None:
        from monarch_cy.actor import Channel
        self.pid = os.getpid()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.entries: dict[int, _Entry] = {}
        self.fencing: dict[int, _Entry] = {}   # dropped, memory held until leases go
        self.port, self._recv = Channel.open()
        self._staging = threading.local()
        self.threads = []
        for i in range(SERVICE_THREADS):
            t = threading.Thread(target=self._serve, name=f"monarch_cy-rdma-service-{i}",
                                 daemon=True)
            t.start()
            self.threads.append(t)

    # -- registry ------------------------------------------------------------
    def register(self, span: Span) -> BufferHandle:
        """Register ``span``; return its handle.  Keeps ``span.keep`` alive until drop."""
        self._sweep()
        buf_id = next(self._ids)
        cell, token = _leases.alloc()
        entry = _Entry(span, cell, token)
        ipc = None
        if span.on_gpu:
            ipc = _export_ipc(span)
        verbs = None
        from monarch_cy._rdma_buffer import _verbs_backend
        if _verbs_backend.available():
            try:
                entry.mr = _verbs_backend.register(span)
                verbs = entry.mr.remote()
            except Exception:   # noqa: BLE001 - no verbs for this buffer: other backends
                entry.mr = None
        own = _leases.own()
        h = BufferHandle(
            job=_identity.job_fingerprint(), buf_id=buf_id, owner_key=_identity.this_proc_key(),
            owner_pid=self.pid, owner_start=_identity.start_time(self.pid) or 0,
            host=_identity.host_id(), pidns=_identity.pidns(), addr=span.addr,
            nbytes=span.nbytes, device=span.device, readonly=span.readonly,
            lease_fd=own.fd, lease_id=own.table_id, cell=cell, token=token,
            service=self.port, ipc=ipc, verbs=verbs)
        entry.handle = h
        with self._lock:
            self.entries[buf_id] = entry
        return h

    def lookup(self, buf_id: int, token: int) -> _Entry:
        e = self.entries.get(buf_id)
        if e is None or e.token != token:
            raise BufferDroppedError(
                f"buffer {buf_id} of process {self.pid} was dropped; it cannot be read or "
                "written any more")
        return e

    def hold(self, e: _Entry, h=None) -> int:
        """A lease of this process on ``e``'s memory (the slot in its table); raises
        ``BufferDroppedError`` once it is dropped, ``RDMAError`` if its memory moved.
        Read ``e.span`` only after this."""
        slot = _leases.own_lease(h if h is not None else e.handle)
        guard = e.guard
        why = guard.moved() if guard is not None else None
        if why is not None:
            _leases.own().table.release(slot)
            raise _leases.gone_error(e.handle, why)
        return slot

    def release(self, slot: int) -> None:
        _leases.own().table.release(slot)

    def drop(self, buf_id: int, token: int) -> None:
        """Drop the buffer (module docstring: blocks up to ``_leases.DROP_WAIT``).
        Idempotent; a drop racing another one returns when that one's wait is over."""
        with self._lock:
            e = self.entries.get(buf_id)
            first = e is not None and e.token == token
            if first:
                del self.entries[buf_id]
                self.fencing[buf_id] = e
            else:
                e = self.fencing.get(buf_id)
                if e is None or e.token != token:
                    return
        if first:
            _leases.own().table.clear(e.cell)   # no lease can be claimed from here on
            if e.mr is not None:
                try:
                    e.mr.close()                # the NIC fails operations in flight on it
                except Exception:   # noqa: BLE001 - the memory goes either way
                    pass
        live = self._finish(buf_id, e, _leases.DROP_WAIT)
        self._sweep()
        if live:
            raise RDMATimeoutError(
                f"buffer {buf_id} of {e.handle.owner_key} is dropped (no operation can start "
                f"on it) but {len(live)} process(es) (pid {', '.join(map(str, live))}) still "
                f"had operations on it in flight after {_leases.DROP_WAIT:g} s; its memory "
                "stays referenced until they end or die (a later drop() or RDMABuffer() in "
                "this process lets it go then)")

    def _finish(self, buf_id: int, e: _Entry, bound: float, blocking: bool = True) -> list:
        """Wait (``bound``) for the leases on dropped ``e``; let its memory go if none is
        left.  Returns the pids still holding leases ([] once released)."""
        if not e.lock.acquire(blocking, bound + 5.0 if blocking else -1):
            return _leases.fence(e.cell, 0.0) if blocking else []
        try:
            if e.span is None:
                return []
            live = _leases.fence(e.cell, bound)
            if live:
                return live
            with self._lock:
                self.fencing.pop(buf_id, None)
            keep, e.span, e.guard = e.span.keep, None, None
            _leases.free(e.cell)
        finally:
            e.lock.release()
        release = getattr(keep, "release", None)
        if release is not None and type(keep).__name__ == "_Pinned":
            release()
        return []

    def _sweep(self) -> None:
        """Let go of dropped buffers whose last leases have gone since."""
        if self.fencing:
            for buf_id, e in list(self.fencing.items()):
                self._finish(buf_id, e, 0.0, blocking=False)

    # -- service -------------------------------------------------------------
    def _serve(self) -> None:
        recv = self._recv
        while True:
            try:
                req = recv.recv().get()
            except Exception:   # noqa: BLE001 - a bad message must not stop the service
                continue
            try:
                self._handle(req)
            except Exception:   # noqa: BLE001
                from monarch_cy._log import logger
                logger("rdma").exception("serving an RDMA buffer request failed")

    def _handle(self, req) -> None:
        op = req[0]
        reply, tag = req[-2], req[-1]
        try:
            if op == "read":
                _, buf_id, token, offset, n, _, _ = req
                value = self._read(self.lookup(buf_id, token), offset, n)
            elif op == "write":
                _, buf_id, token, offset, data, _, _ = req
                value = self._write(self.lookup(buf_id, token), offset, data)
            elif op == "drop":
                self.drop(req[1], req[2])
                value = None
            elif op == "check":
                self.lookup(req[1], req[2])
                value = None
            elif op == "qp":
                from monarch_cy._rdma_buffer import _verbs_backend
                value = _verbs_backend.accept(req[1], req[2])
            else:
                raise ValueError(f"unknown rdma service request {op!r}")
        except Exception as e:  # noqa: BLE001 - answered to the requester
            reply.exception(e)
            return
        reply.send((tag, value))

    def _read(self, e: _Entry, offset: int, n: int):
        from monarch_cy._leases import LeasedView
        slot = self.hold(e)
        try:
            span = e.span
            _check_range(span.nbytes, offset, n)
            if not span.on_gpu:
                # The reply lends these bytes to the transport, leased until it lets go.
                view = LeasedView(_leases.own().table, slot, span.addr + offset, n)
                slot = -1
                return pickle.PickleBuffer(view)
            staging = self._pinned(n)
            from monarch_cy import gpu
            gpu.copy(staging, _device_memory(span), n, src_offset=offset)
        finally:
            if slot >= 0:
                self.release(slot)
        out = bytearray(n)    # fresh: the transport may send it without copying
        ctypes.memmove((ctypes.c_char * n).from_buffer(out), staging.ptr, n)
        return pickle.PickleBuffer(out)

    def _write(self, e: _Entry, offset: int, data) -> int:
        mv = memoryview(data).cast("B")
        n = mv.nbytes
        slot = self.hold(e)
        try:
            span = e.span
            _check_range(span.nbytes, offset, n)
            if span.readonly:
                raise ValueError("the buffer was registered over read-only memory; it cannot "
                                 "be written")
            if not span.on_gpu:
                host_view(span.addr + offset, n)[:] = mv
            else:
                from monarch_cy import gpu
                staging = self._pinned(n)
                staging.view()[:n] = mv
                gpu.copy(_device_memory(span), staging, n, dst_offset=offset)
        finally:
            self.release(slot)
            del mv
        return n

    def _pinned(self, n: int):
        """This thread's pinned staging buffer, at least ``n`` bytes."""
        from monarch_cy import gpu
        buf = getattr(self._staging, "buf", None)
        if buf is None or buf.nbytes < n:
            if buf is not None:
                buf.close()
            buf = self._staging.buf = gpu.PinnedBuffer(max(n, 8 << 20))
        return buf


def _check_range(size: int, offset: int, n: int) -> None:
    if offset < 0 or n < 0 or offset + n > size:
        raise ValueError(f"range [{offset}, {offset + n}) is outside the {size}-byte buffer")


def _device_memory(span: Span):
    from monarch_cy import gpu
    return gpu.DeviceMemory(span.addr, span.nbytes, span.device, owner=span.keep)


def _export_ipc(span: Span):
    """The GPU IPC handle of ``span`` (None where the runtime cannot export it)."""
    try:
        return _device_memory(span).ipc_handle()
    except Exception:   # noqa: BLE001 - no IPC: same-host readers use TCP
        return None


_service = None
_service_lock = threading.Lock()


def service() -> OwnerService:
    """This process's service (made on first use; remade in a forked child)."""
    global _service
    s = _service
    if s is not None and s.pid == os.getpid():
        return s
    with _service_lock:
        if _service is None or _service.pid != os.getpid():
            _service = OwnerService()
        return _service


def current():
    """The service if this process made one, else None."""
    s = _service
    return s if s is not None and s.pid == os.getpid() else None
