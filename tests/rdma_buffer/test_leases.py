"""The lease table (``monarch_cy._leases``) and how cross-memory-attach errors map
to the library's errors (``_rdma_buffer/_samehost.py``), within one process."""

from __future__ import annotations

import errno
import os
import time

import numpy as np
import pytest

from monarch_cy import _leases as L
from monarch_cy.rdma import BufferDroppedError, OwnerDiedError, RDMABuffer, RDMAError


@pytest.fixture
def table():
    n = L.table_bytes(64, 128)
    fd = os.memfd_create("lease-test", os.MFD_CLOEXEC)
    os.ftruncate(fd, n)
    try:
        yield fd, L.LeaseTable(fd, 0xABC, 64, 128, True)
    finally:
        os.close(fd)


def test_claim_check_release(table):
    fd, owner = table
    owner.set(5, 77)
    reader = L.LeaseTable(fd, 0xABC, 64, 128, False, os.pidfd_open(os.getpid()))
    me = os.getpid()
    s = reader.claim(5, 77, me, 1)
    assert s >= 0 and owner.holders(5) == [(s, me, (me << 32) | 6)]
    assert reader.claim(5, 76, me) == L.DROPPED and len(owner.holders(5)) == 1  # nothing kept
    reader.release(s)
    assert owner.holders(5) == [] and owner.used_slots() == 0
    assert owner.clear(5) == 77 and reader.token(5) == 0
    assert reader.claim(5, 77, me) == L.DROPPED                   # dropped: refused
    assert not reader.exited()


def test_full_table_and_reclaim(table):
    _, t = table
    t.set(1, 9)
    slots = [t.claim(1, 9, 1234, i) for i in range(64)]
    assert sorted(slots) == list(range(64))
    assert t.claim(1, 9, 1234) == L.FULL
    assert not t.reclaim(slots[0], 1)                             # not its value: kept
    assert t.reclaim(slots[0], (1234 << 32) | 2)
    assert t.claim(1, 9, 1234) == slots[0]


def test_leased_view_releases_when_freed(table):
    _, t = table
    t.set(0, 3)
    data = bytearray(b"abcdef")
    from monarch_cy._hostmem import BufferPin
    pin = BufferPin(data)
    v = L.LeasedView(t, t.claim(0, 3, os.getpid()), pin.address, 6)
    mv = memoryview(v)
    del v
    assert t.used_slots() == 1 and bytes(mv) == b"abcdef" and mv.readonly
    mv.release()
    assert t.used_slots() == 0
    pin.release()


def test_header_and_bounds_checked(table):
    fd, t = table
    with pytest.raises(ValueError, match="is not lease table"):
        L.LeaseTable(fd, 0xABD, 64, 128, False)
    with pytest.raises(ValueError, match=r"cell must be in \[0, 128\)"):
        t.token(128)
    with pytest.raises(ValueError, match="pid must be"):
        t.claim(0, 1, 0)


def test_exited_owner_refuses_claims(table):
    import subprocess
    import sys
    fd, t = table
    t.set(2, 5)
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    pidfd = os.pidfd_open(p.pid)
    p.wait()
    reader = L.LeaseTable(fd, 0xABC, 64, 128, False, pidfd)
    assert reader.exited() and reader.claim(2, 5, os.getpid()) == L.EXITED
    assert t.used_slots() == 0


# -- cross-memory attach's errors, on a buffer of this process (backend forced) ----------
def _cma_fails(monkeypatch, err):
    from monarch_cy._rdma_buffer import _cma

    def fail(*a, **k):
        raise OSError(err, os.strerror(err)) if err != errno.ESRCH else \
            ProcessLookupError(err, "gone")
    monkeypatch.setattr(_cma, "_copy", fail)


@pytest.mark.parametrize("err,cls,text", [
    (errno.EFAULT, RDMAError, "unmapped"),
    (errno.ENOMEM, RDMAError, "cross-memory attach to .* failed for buffer"),
    (errno.ESRCH, OwnerDiedError, "died"),
])
def test_cma_errors_are_library_errors(monkeypatch, err, cls, text):
    buf = RDMABuffer(np.zeros(4096, np.uint8))
    try:
        _cma_fails(monkeypatch, err)
        for fut in (buf.read_into(np.zeros(4096, np.uint8), backend="cma"),
                    buf.write_from(np.ones(16, np.uint8), backend="cma")):
            with pytest.raises(cls, match=text) as info:
                fut.get(timeout=10)
            assert type(info.value) is cls and not isinstance(info.value, OSError)
        from monarch_cy._rdma_buffer import _leases
        assert _leases.own().table.holders(buf._h.cell) == []     # leases given back
    finally:
        monkeypatch.undo()
        buf.drop().get(timeout=10)


def test_cma_read_of_own_buffer_and_drop_are_quick():
    a = np.arange(1 << 20, dtype=np.uint32).view(np.uint8)
    buf = RDMABuffer(a)
    dst = np.zeros(a.nbytes, np.uint8)
    buf.read_into(dst, backend="cma").get(timeout=10)
    assert (dst == a).all()
    t0 = time.monotonic()
    buf.drop().get(timeout=10)
    assert time.monotonic() - t0 < 0.5
    with pytest.raises(BufferDroppedError):
        RDMABuffer._from_handle(buf._h).read_into(dst, backend="cma").get(timeout=10)
