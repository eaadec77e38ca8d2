"""Liveness and leases: no read or write touches a registration's memory after its drop.

Every process that registers buffers owns one *lease table*
(:class:`monarch_cy._leases.LeaseTable`): a sealed memfd of 4096 lease slots and up
to 2**20 cells, made on first use.  A registration takes a cell and writes a random
non-zero 64-bit token in it; the handle carries the table's fd number and random id,
the cell and the token.

Anyone copying the owner's memory -- a same-host reader with cross-memory attach,
the owner's own service threads (TCP path), the owner itself (``local``) --
first *claims a lease*: it stores its pid and the cell in a free slot
(compare-and-swap), then reads the cell.  A different token means the buffer was
dropped: the slot is freed and ``BufferDroppedError`` raised.  Otherwise it copies,
then frees the slot.  A reader maps the owner's table once, through
``/proc/<pid>/fd/<n>`` (which needs ptrace-read access to the owner, less than the
cross-memory attach it is about to do; refused, the caller falls back to TCP), and
holds a pidfd of the owner: a lease is refused once the owner has exited, so a pid
that names another process by now is never written.

``drop`` (owner side, :func:`fence`) zeroes the cell, then waits until every slot
held on it is freed or its holder's process is dead (a pidfd, or ESRCH), at most
``DROP_WAIT`` seconds; only then does the owner let the memory go.  The two sides
use sequentially consistent atomics in the order claim-then-check and
clear-then-scan, so either the claimer sees the cleared cell or ``drop`` sees the
lease.  Past the bound the memory stays referenced (the caller keeps it) and
:func:`fence` returns the pids still holding leases.

An owner's death needs no fence: the kernel keeps a process's memory while a
cross-memory-attach call on it runs, and refuses calls once it is gone (ESRCH).
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import threading
import time

from monarch_cy import _leases
from monarch_cy._errors import BufferDroppedError, RDMAError, RDMATimeoutError

__all__ = ["alloc", "free", "own", "own_lease", "remote", "claim", "fence", "pid_exited",
           "dropped_error", "gone_error", "forget_remote", "NSLOTS", "NCELLS", "DROP_WAIT"]

NSLOTS = 4096          # leases held at once on one owner's buffers, by all processes
NCELLS = 1 << 20       # buffers registered at once in one process
DROP_WAIT = 10.0       # seconds drop() waits for operations in flight


class _Own:
    """This process's table (owner side)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.table_id = int.from_bytes(os.urandom(8), "little") | 1
        size = _leases.table_bytes(NSLOTS, NCELLS)
        fd = os.memfd_create(f"monarch_cy-leases-{self.pid}",
                             os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)           # sparse: pages appear as cells are used
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self.table = _leases.LeaseTable(fd, self.table_id, NSLOTS, NCELLS, True)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd                         # kept open: readers open /proc/<pid>/fd/<fd>
        self.lock = threading.Lock()
        self.next = 0
        self.free: list = []


_own = None
_own_lock = threading.Lock()


def own() -> _Own:
    """This process's lease table (made on first use; remade in a forked child)."""
    global _own
    o = _own
    if o is not None and o.pid == os.getpid():
        return o
    with _own_lock:
        if _own is None or _own.pid != os.getpid():
            _own = _Own()
        return _own


def alloc() -> tuple[int, int]:
    """``(cell, token)``: a free cell of this process's table, holding a fresh token."""
    o = own()
    with o.lock:
        if o.free:
            cell = o.free.pop()
        elif o.next < NCELLS:
            cell, o.next = o.next, o.next + 1
        else:
            raise RDMAError(f"this process has {NCELLS} RDMABuffers registered, the most "
                            "it can hold at once; drop some before registering more")
    token = int.from_bytes(os.urandom(8), "little") | 1
    o.table.set(cell, token)
    return cell, token


def free(cell: int) -> None:
    """Give ``cell`` back (after :func:`fence` found no lease on it); its next token differs."""
    o = own()
    with o.lock:
        o.free.append(cell)


# -- leases ----------------------------------------------------------------------
def dropped_error(h) -> BufferDroppedError:
    return BufferDroppedError(f"buffer {h.buf_id} of {h.owner_key} was dropped; it cannot be "
                              "read or written any more")


def gone_error(h, why: str) -> RDMAError:
    """The error of an operation that found ``h``'s registered memory gone (``why``)
    although the buffer was not dropped."""
    return RDMAError(f"buffer {h.buf_id} of {h.owner_key} ({h.nbytes} bytes at "
                     f"{h.addr:#x} there) cannot be read or written: {why}")


def claim(table, h, deadline: float | None = None) -> int:
    """Claim a lease on ``h``'s cell in ``table`` (a remote or this process's table);
    returns the slot, to give back with ``table.release(slot)``.

    Raises ``BufferDroppedError`` (dropped), ``OwnerDiedError`` (the table's owner
    exited), ``RDMATimeoutError`` (all slots stayed taken until ``deadline``, default
    ``DROP_WAIT`` from now).
    """
    pid = os.getpid()
    slot = table.claim(h.cell, h.token, pid, threading.get_ident())
    if slot >= 0:
        return slot
    if slot == _leases.DROPPED:
        raise dropped_error(h)
    if slot == _leases.EXITED:
        from monarch_cy._rdma_buffer import _watch
        forget_remote(h)
        raise _watch.died_error(h.owner_key, f"pid {h.owner_pid} exited")
    if deadline is None:
        deadline = time.monotonic() + DROP_WAIT
    while slot == _leases.FULL:
        if time.monotonic() >= deadline:
            raise RDMATimeoutError(
                f"all {NSLOTS} lease slots of {h.owner_key} stayed taken (that many "
                "operations in flight on its buffers); the operation did not start")
        time.sleep(0.001)
        slot = table.claim(h.cell, h.token, pid, threading.get_ident())
    return claim(table, h, deadline) if slot < 0 else slot


def own_lease(h) -> int:
    """A lease of this process on its own buffer ``h`` (service threads, ``local``)."""
    return claim(own().table, h)


# -- the owner's side of drop ---------------------------------------------------------
def pid_exited(pid: int) -> bool:
    """True when ``pid`` names no running process (gone, or a zombie)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except OSError:                      # no pidfd here: signal 0 (a zombie counts as alive)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False
    try:
        p = select.poll()
        p.register(fd, select.POLLIN)
        return bool(p.poll(0))
    finally:
        os.close(fd)


def fence(cell: int, bound: float) -> list:
    """Wait until no live process holds a lease on ``cell`` of this process's table
    (call after zeroing the cell).  Leases of dead holders are freed here.  Returns
    ``[]``, or after ``bound`` seconds the pids still holding leases."""
    o = own()
    deadline = time.monotonic() + bound
    pause = 0.0002
    while True:
        live = []
        for slot, pid, value in o.table.holders(cell):
            if pid != o.pid and pid_exited(pid):
                o.table.reclaim(slot, value)
            else:
                live.append(pid)
        left = deadline - time.monotonic()
        if not live or left <= 0:
            return sorted(set(live))
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.01)


# -- the readers' side ---------------------------------------------------------------
_remote: dict = {}              # (owner pid, owner start, table id) -> LeaseTable
_remote_pid = None
_remote_lock = threading.Lock()


def _key(h):
    return (h.owner_pid, h.owner_start, h.lease_id)


def forget_remote(h) -> None:
    """Unmap ``h``'s owner's table here once the owner is gone (users in flight keep it)."""
    with _remote_lock:
        _remote.pop(_key(h), None)


def remote(h):
    """The owner's table, mapped here (cached per owner).

    Raises ``PermissionError`` when this process cannot reach it (another pid
    namespace, ptrace access refused, no pidfd): callers fall back to the TCP path;
    ``OwnerDiedError`` when the owner is gone.
    """
    global _remote_pid
    t = _remote.get(_key(h))
    if t is not None and _remote_pid == os.getpid():
        return t
    with _remote_lock:
        if _remote_pid != os.getpid():
            _remote.clear()
            _remote_pid = os.getpid()
        t = _remote.get(_key(h))
        if t is None:
            t = _remote[_key(h)] = _open(h)
        return t


def _open(h):
    from monarch_cy._rdma_buffer import _identity, _watch
    if h.pidns != _identity.pidns():
        raise PermissionError(errno.EPERM, f"the owner of buffer {h.buf_id} ({h.owner_key}) "
                                           "runs in another pid namespace")
    try:
        pidfd = os.pidfd_open(h.owner_pid)
    except ProcessLookupError:
        raise _watch.died_error(h.owner_key, f"pid {h.owner_pid} is gone") from None
    except OSError as e:
        raise PermissionError(errno.EPERM, f"pidfd_open({h.owner_pid}) failed ({e}); same-host "
                                           "one-sided copies need it") from None
    try:
        try:
            fd = os.open(f"/proc/{h.owner_pid}/fd/{h.lease_fd}", os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = None
        except PermissionError as e:
            raise PermissionError(errno.EPERM, f"cannot open the lease table of "
                                               f"{h.owner_key}: {e}") from None
        try:
            ok = fd is not None
            if ok:
                try:
                    t = _leases.LeaseTable(fd, h.lease_id, NSLOTS, NCELLS, False, pidfd)
                except ValueError:
                    ok = False
        finally:
            if fd is not None:
                os.close(fd)
        if not ok:
            if _watch.owner_gone(h):
                raise _watch.died_error(h.owner_key, f"pid {h.owner_pid} is gone")
            raise PermissionError(errno.EPERM, f"pid {h.owner_pid} holds no lease table "
                                               f"{h.lease_id:#x} at fd {h.lease_fd}")
    except BaseException:
        os.close(pidfd)
        raise
    return t                                 # the table owns the pidfd from now on
