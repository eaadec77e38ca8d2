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

Memory safety (see :mod:`._leases`): ``cma`` and ``local`` copy under a lease on
the buffer, claimed before the copy (a dropped buffer raises
``BufferDroppedError`` then) and given back after it, so the owner's ``drop``
waits for the copy before it lets the memory go.  Every failure of cross-memory
attach is one of the library's errors: ESRCH, or an owner that exited while the
copy ran, is ``OwnerDiedError``; EFAULT (the registered memory is not mapped in the
owner any more: freed or moved under a live registration, e.g. ``resize_()`` of a
registered tensor) is ``RDMAError`` naming the buffer; EPERM stays
``PermissionError``, which the engine turns into the TCP fallback.  A write that
fails part-way may have changed part of the range; it never reports success.

``ipc`` checks the buffer's token before its copy (the table's cell, or a round
trip to the owner's service where the table cannot be mapped) but takes no
lease: nothing stops a drop between the check and the copy there (see
``docs/rdma.md``).  All functions block.
"""

from __future__ import annotations

import ctypes
import errno
import threading

from monarch_cy._errors import BufferDroppedError, RDMAError
from monarch_cy._rdma_buffer import _cma, _leases, _watch
from monarch_cy._rdma_buffer._local import Span

__all__ = ["check_token", "cma_read", "cma_write", "ipc_read", "ipc_write", "local_copy",
           "forget"]

STAGE = 8 << 20


def _died(h, why: str = "is gone"):
    return _watch.died_error(h.owner_key, f"pid {h.owner_pid} {why}")


def check_token(h, fallback_timeout: float = 10.0) -> None:
    """Raise if ``h``'s buffer was dropped or its owner died (see the module docstring)."""
    try:
        table = _leases.remote(h)
    except PermissionError:
        from monarch_cy._rdma_buffer import _owner_call
        _owner_call.request(h, "check", (h.buf_id, h.token), fallback_timeout)
        return
    if table.exited():
        _leases.forget_remote(h)
        raise _died(h, "exited")
    if table.token(h.cell) != h.token:
        raise _leases.dropped_error(h)


def _cma_call(fn, h, local: int, remote: int, n: int) -> None:
    try:
        fn(h.owner_pid, local, remote, n)
    except PermissionError:
        raise
    except ProcessLookupError:
        raise _died(h) from None
    except OSError as e:
        if e.errno == errno.EFAULT:
            raise _leases.gone_error(
                h, "the kernel found it unmapped (EFAULT): the owner freed or moved it although "
                   "the buffer is registered (resize_() of a registered tensor or its storage, "
                   "a closed memory object?), or the local memory is unmapped") from None
        raise RDMAError(f"cross-memory attach to {h.owner_key} failed for buffer {h.buf_id}: "
                        f"{e}") from None


def _cma_op(h, span: Span, local_offset: int, offset: int, n: int, read: bool) -> None:
    """One cross-memory-attach operation under a lease (module docstring)."""
    table = _leases.remote(h)         # PermissionError: the engine falls back to tcp
    slot = _leases.claim(table, h)
    try:
        fn = _cma.read if read else _cma.write
        if not span.on_gpu:
            _cma_call(fn, h, span.addr + local_offset, h.addr + offset, n)
        else:
            _staged(fn, h, span, local_offset, offset, n, read)
    except RDMAError as e:
        if table.exited():                 # the owner's death explains the failure
            _leases.forget_remote(h)
            raise _died(h, "exited while the operation ran") from e
        raise
    finally:
        table.release(slot)
    if table.exited():
        # The kernel kept the owner's memory for the copy; its result cannot be relied on.
        _leases.forget_remote(h)
        raise _died(h, "exited while the operation ran")


def _staged(fn, h, span: Span, local_offset: int, offset: int, n: int, read: bool) -> None:
    """A GPU span here: through a pinned buffer, ``STAGE`` bytes at a time."""
    from monarch_cy import gpu
    with gpu.PinnedBuffer(min(STAGE, n)) as st:
        dev = _mem(span)
        for o in range(0, n, STAGE):
            ln = min(STAGE, n - o)
            if read:
                _cma_call(fn, h, st.ptr, h.addr + offset + o, ln)
                gpu.copy(dev, st, ln, dst_offset=local_offset + o)
            else:
                gpu.copy(st, dev, ln, src_offset=local_offset + o)
                _cma_call(fn, h, st.ptr, h.addr + offset + o, ln)


def _mem(span: Span, addr: int | None = None, n: int | None = None):
    """``span`` as a monarch_cy.gpu memory object (for runtime copies)."""
    from monarch_cy import gpu
    addr = span.addr if addr is None else addr
    n = span.nbytes if n is None else n
    if span.on_gpu:
        return gpu.DeviceMemory(addr, n, span.device, owner=span.keep)
    return gpu.HostMemory.from_address(addr, n, owner=span.keep)


def cma_read(h, span: Span, dst_offset: int, offset: int, n: int) -> None:
    _cma_op(h, span, dst_offset, offset, n, True)


def cma_write(h, span: Span, src_offset: int, offset: int, n: int) -> None:
    _cma_op(h, span, src_offset, offset, n, False)


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
    """Same process: the owner's entry is looked up here (dropped: BufferDroppedError)
    and copied under a lease of this process."""
    from monarch_cy._rdma_buffer import _owner
    svc = _owner.current()
    if svc is None:
        raise _leases.dropped_error(h)
    entry = svc.lookup(h.buf_id, h.token)
    if n == 0:
        return
    slot = svc.hold(entry, h)
    try:
        remote = entry.span
        src_addr, dst_addr = (remote.addr + offset, span.addr + local_offset) if read else \
            (span.addr + local_offset, remote.addr + offset)
        src_span, dst_span = (remote, span) if read else (span, remote)
        if not src_span.on_gpu and not dst_span.on_gpu:
            ctypes.memmove(dst_addr, src_addr, n)
            return
        from monarch_cy import gpu
        gpu.copy(_mem(dst_span, dst_addr, n), _mem(src_span, src_addr, n), n)
    finally:
        svc.release(slot)
