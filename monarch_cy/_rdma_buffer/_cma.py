"""Cross-memory attach: ``process_vm_readv`` / ``process_vm_writev`` (Linux >= 3.2).

One kernel copy between this process's memory and another process's, no shared
mapping and no staging.  The kernel allows it when the caller may ptrace the
target (same user, same or ancestor user namespace, the target dumpable, and
Yama's ``ptrace_scope`` -- where the module is loaded -- at 0, or 1 with the
caller an ancestor).  A refusal is ``PermissionError`` (EPERM); callers fall back
to the TCP path.  A target that is gone raises ``ProcessLookupError`` (ESRCH);
anything else (EFAULT: memory not mapped on one side) is ``OSError``.  This module
knows no buffers: :mod:`._samehost` runs each call under a lease and turns these
into the library's errors.

Calls go through ctypes (which releases the GIL around them).  Spans of at least
``PARALLEL_MIN`` bytes are cut into ``threads`` pieces copied by that many threads
at once (the kernel copy runs on the calling CPU, so two threads use two cores).
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading

from monarch_cy import _config

__all__ = ["read", "write", "PARALLEL_MIN", "THREADS"]

PARALLEL_MIN = 8 << 20
THREADS = _config.rdma_cma_threads()     # MONARCH_CY_RDMA_CMA_THREADS, 1..4, read at import


class _Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_fns = {}
for _name in ("process_vm_readv", "process_vm_writev"):
    _f = getattr(_libc, _name)
    _f.restype = ctypes.c_ssize_t
    _f.argtypes = [ctypes.c_int, ctypes.POINTER(_Iov), ctypes.c_ulong,
                   ctypes.POINTER(_Iov), ctypes.c_ulong, ctypes.c_ulong]
    _fns[_name] = _f


def _raise(err: int, pid: int, what: str):
    if err == errno.EPERM:
        raise PermissionError(err, f"{what}: the kernel refused cross-memory attach to pid "
                                   f"{pid} (EPERM: ptrace access denied)")
    if err == errno.ESRCH:
        raise ProcessLookupError(err, f"{what}: process {pid} does not exist")
    raise OSError(err, f"{what} on pid {pid}: {os.strerror(err)}")


def _one(fn, name: str, pid: int, local: int, remote: int, n: int) -> None:
    done = 0
    while done < n:
        li = _Iov(local + done, n - done)
        ri = _Iov(remote + done, n - done)
        got = fn(pid, ctypes.byref(li), 1, ctypes.byref(ri), 1, 0)
        if got < 0:
            _raise(ctypes.get_errno(), pid, name)
        if got == 0:
            raise OSError(errno.EFAULT, f"{name} on pid {pid} moved 0 of {n - done} bytes "
                                        f"at remote {remote + done:#x} (unmapped memory?)")
        done += got


def _copy(name: str, pid: int, local: int, remote: int, n: int, threads: int) -> None:
    fn = _fns[name]
    if n < PARALLEL_MIN or threads <= 1:
        _one(fn, name, pid, local, remote, n)
        return
    piece = -(-n // threads)
    piece = (piece + 4095) & ~4095
    errors = []

    def run(off, ln):
        try:
            _one(fn, name, pid, local + off, remote + off, ln)
        except BaseException as e:  # noqa: BLE001 - re-raised below in the caller
            errors.append(e)

    workers = []
    for off in range(piece, n, piece):
        t = threading.Thread(target=run, args=(off, min(piece, n - off)), daemon=True)
        t.start()
        workers.append(t)
    run(0, min(piece, n))
    for t in workers:
        t.join()
    if errors:
        raise errors[0]


def read(pid: int, local: int, remote: int, n: int, threads: int | None = None) -> None:
    """Copy ``n`` bytes at ``remote`` in process ``pid`` to ``local`` here; blocks.
    ``threads`` defaults to the module's ``THREADS`` at the time of the call."""
    _copy("process_vm_readv", pid, local, remote, n, THREADS if threads is None else threads)


def write(pid: int, local: int, remote: int, n: int, threads: int | None = None) -> None:
    """Copy ``n`` bytes at ``local`` here to ``remote`` in process ``pid``; blocks."""
    _copy("process_vm_writev", pid, local, remote, n, THREADS if threads is None else threads)
