"""Same-host backends: ``local`` (same process), ``cma`` (CPU memory), ``ipc`` (GPU memory).

* ``local``: the owner is this process; one ``memmove`` or one runtime copy.
* ``cma``: the owner's memory is host memory; one kernel copy with
  ``process_vm_readv``/``process_vm_writev`` (see :mod:`._cma`).  A GPU span on
  this side is staged through a pinned buffer (CMA into it, then one H2D copy;
  the reverse for writes).
* ``ipc``: the owner's memory is GPU memory; its IPC handle is opened once per
  owner buffer and cached here (closed when the buffer is dropped), then each
  operation is one runtime copy (D2D, or D2H/H2D straight to or from host memory).
  The runtime copy is synchronous on the legacy default stream: the owner must
  have finished writing its buffer (synchronised its stream) before a reader reads.

Before touching the owner's memory, each operation reads the buffer's liveness
token (8 bytes, one CMA read; a round trip to the owner's service where the kernel
refuses CMA): a dropped buffer raises ``BufferDroppedError``, a dead owner
``OwnerDiedError``.  All functions block.
"""

from __future__ import annotations

import ctypes
import threading

from monarch_cy._rdma_buffer import _cma, _watch
from monarch_cy._rdma_buffer._errors import BufferDroppedError
from monarch_cy._rdma_buffer._local import Span

__all__ = ["check_token", "cma_read", "cma_write", "ipc_read", "ipc_write", "local_copy",
           "forget"]

STAGE = 8 << 20


def _dropped(h) -> BufferDroppedError:
    return BufferDroppedError(f"buffer {h.buf_id} of {h.owner_key} was dropped; it cannot be "
                              "read or written any more")


def check_token(h, fallback_timeout: float = 10.0) -> None:
    """Raise if ``h``'s buffer was dropped or its owner died (see the module docstring)."""
    cell = ctypes.c_uint64(0)
    try:
        _cma.read(h.owner_pid, ctypes.addressof(cell), h.token_addr, 8, threads=1)
    except ProcessLookupError:
        raise _watch.died_error(h.owner_key, f"pid {h.owner_pid} is gone") from None
    except PermissionError:
        from monarch_cy._rdma_buffer import _tcp
        _tcp.request(h, "check", (h.buf_id, h.token), fallback_timeout)
        return
    if cell.value != h.token:
        if _watch.owner_gone(h):
            raise _watch.died_error(h.owner_key, f"pid {h.owner_pid} is gone")
        raise _dropped(h)


def _cma_call(fn, h, *args) -> None:
    try:
        fn(h.owner_pid, *args)
    except ProcessLookupError:
        raise _watch.died_error(h.owner_key, f"pid {h.owner_pid} is gone") from None


def _mem(span: Span, addr: int | None = None, n: int | None = None):
    """``span`` as a monarch_cy.gpu memory object (for runtime copies)."""
    from monarch_cy import gpu
    addr = span.addr if addr is None else addr
    n = span.nbytes if n is None else n
    if span.on_gpu:
        return gpu.DeviceMemory(addr, n, span.device, owner=span.keep)
    return gpu.HostMemory.from_address(addr, n, owner=span.keep)


def cma_read(h, span: Span, dst_offset: int, offset: int, n: int) -> None:
    check_token(h)
    if not span.on_gpu:
        _cma_call(_cma.read, h, span.addr + dst_offset, h.addr + offset, n)
        return
    from monarch_cy import gpu
    with gpu.PinnedBuffer(min(STAGE, n)) as st:
        dev = _mem(span)
        for o in range(0, n, STAGE):
            ln = min(STAGE, n - o)
            _cma_call(_cma.read, h, st.ptr, h.addr + offset + o, ln)
            gpu.copy(dev, st, ln, dst_offset=dst_offset + o)


def cma_write(h, span: Span, src_offset: int, offset: int, n: int) -> None:
    check_token(h)
    if not span.on_gpu:
        _cma_call(_cma.write, h, span.addr + src_offset, h.addr + offset, n)
        return
    from monarch_cy import gpu
    with gpu.PinnedBuffer(min(STAGE, n)) as st:
        dev = _mem(span)
        for o in range(0, n, STAGE):
            ln = min(STAGE, n - o)
            gpu.copy(st, dev, ln, src_offset=src_offset + o)
            _cma_call(_cma.write, h, st.ptr, h.addr + offset + o, ln)


_maps_lock = threading.Lock()
_maps: dict = {}      # (owner_key, buf_id, token) -> IpcMapping


def _mapping(h):
    key = (h.owner_key, h.buf_id, h.token)
    m = _maps.get(key)
    if m is None:
        with _maps_lock:
            m = _maps.get(key)
            if m is None:
                m = _maps[key] = h.ipc.open()
    return m


def forget(h) -> None:
    """Close the cached IPC mapping of ``h``'s buffer, if any (after a drop)."""
    with _maps_lock:
        m = _maps.pop((h.owner_key, h.buf_id, h.token), None)
    if m is not None:
        try:
            m.close()
        except Exception:   # noqa: BLE001 - the mapping goes either way
            pass


def ipc_read(h, span: Span, dst_offset: int, offset: int, n: int) -> None:
    try:
        check_token(h)
    except BufferDroppedError:
        forget(h)
        raise
    from monarch_cy import gpu
    gpu.copy(_mem(span), _mapping(h), n, dst_offset=dst_offset, src_offset=offset)


def ipc_write(h, span: Span, src_offset: int, offset: int, n: int) -> None:
    try:
        check_token(h)
    except BufferDroppedError:
        forget(h)
        raise
    from monarch_cy import gpu
    gpu.copy(_mapping(h), _mem(span), n, dst_offset=offset, src_offset=src_offset)


def local_copy(h, span: Span, local_offset: int, offset: int, n: int, read: bool) -> None:
    """Same process: the owner's entry is looked up here (dropped: BufferDroppedError)."""
    from monarch_cy._rdma_buffer import _owner
    svc = _owner.current()
    if svc is None:
        raise _dropped(h)
    entry = svc.lookup(h.buf_id, h.token)
    remote = entry.span
    if n == 0:
        return
    src_addr, dst_addr = (remote.addr + offset, span.addr + local_offset) if read else \
        (span.addr + local_offset, remote.addr + offset)
    src_span, dst_span = (remote, span) if read else (span, remote)
    if not src_span.on_gpu and not dst_span.on_gpu:
        ctypes.memmove(dst_addr, src_addr, n)
        return
    from monarch_cy import gpu
    gpu.copy(_mem(dst_span, dst_addr, n), _mem(src_span, src_addr, n), n)
