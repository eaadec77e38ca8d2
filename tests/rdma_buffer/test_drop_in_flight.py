"""Memory safety of one-sided operations: drop, owner death and moved memory.

``drop()`` waits for the copies in flight (leases, see ``_rdma_buffer/_leases.py``):
an operation racing a drop either completed before ``drop()`` returned -- its data
right -- or fails with ``BufferDroppedError``; memory the owner allocates after
``drop()`` is never written.  An owner killed mid-transfer gives ``OwnerDiedError``;
memory moved under a registration (``resize_()``) gives an ``RDMAError`` naming the
buffer.  Never a raw ``OSError``, never a partial success.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from _drop_actors import Dropper, Mover

MiB = 1 << 20
BIG = 256 * MiB            # about 50 ms of cross-memory attach here: drops land mid-copy
A, B, C = 0x11, 0x22, 0x33  # the owner's bytes, the fresh array's, the writer's


@pytest.fixture(scope="module")
def duo():
    """``(dropper, mover)`` on two procs of their own (this module's, so that a
    lowered drop bound or a killed proc stays here)."""
    from monarch_cy.actor import this_host
    procs = this_host().spawn_procs(per_host={"procs": 2})
    dropper = procs.slice(procs=0).spawn("dropper", Dropper)
    mover = procs.slice(procs=1).spawn("mover", Mover)
    yield dropper, mover
    procs.stop().get(timeout=20)


@pytest.fixture
def doomed():
    from monarch_cy.actor import this_host
    procs = this_host().spawn_procs(per_host={"procs": 1})
    yield procs.spawn("doomed", Dropper)
    procs.stop().get(timeout=20)


def _race(duo, name, op, backend, keep, wait_busy, n=BIG):
    dropper, mover = duo
    buf = dropper.make.call_one(name, n, A, keep).get(timeout=60)
    mover.start.call_one(buf, op, C, backend).get(timeout=30)
    seen = dropper.drop_in_flight.call_one(name, B, wait_busy).get(timeout=90)
    res = mover.result.call_one(A).get(timeout=90)
    after = dropper.check.call_one(name, B).get(timeout=60)
    return seen, res, after


def _check_outcome(op, seen, res, after, keep):
    err = res["error"]
    assert err is None or err[0] == "BufferDroppedError", (seen, res)
    # nothing landed in memory the owner allocated after drop() returned
    assert after["fresh_untouched"], (seen, res, after)
    if keep:
        # the memory stays the registration's until drop() returns, then nobody's
        assert after["now"] == seen["after_drop"], (seen, res, after)
    if err is None:
        if op == "read":
            assert res["all_want"], (seen, res)          # the owner's bytes, not the fresh ones
        elif keep:
            assert after["kept_values"] == [C], (seen, res, after)   # all of it, before drop


@pytest.mark.parametrize("backend", ["cma", "tcp"])
def test_drop_during_transfer_waits_for_it(duo, backend):
    """A large write_from / read_into on the wire when the owner drops (the owner
    waits until it sees the transfer's lease, then drops), and drops that race the
    start: every outcome is a full success or BufferDroppedError."""
    n = BIG if backend == "cma" else 64 * MiB
    busy = 0
    t0 = time.monotonic()
    for i, (op, keep, wait) in enumerate([("write", False, True), ("read", False, True),
                                          ("write", True, True), ("read", True, True),
                                          ("write", False, False), ("read", False, False)]):
        seen, res, after = _race(duo, f"{backend}-{i}", op, backend, keep, wait, n)
        _check_outcome(op, seen, res, after, keep)
        busy += seen["busy"]
        if seen["busy"] and backend == "cma":
            assert res["error"] is None, (seen, res)     # the lease was claimed: it completes
    assert busy >= 2, "no drop landed while a transfer was on the wire"
    assert time.monotonic() - t0 < 60      # about 8-16 s on the 2-core VM


def test_owner_killed_mid_write_is_owner_died(duo, doomed):
    """The owner exits while a write is on the wire: OwnerDiedError (the kernel kept
    the dying owner's memory for the copy, but nobody can rely on it), then at once
    for each later operation."""
    _, mover = duo
    buf = doomed.make.call_one("w", BIG, A).get(timeout=60)
    mover.start.call_one(buf, "write", C, "cma").get(timeout=30)
    doomed.die_in_flight.broadcast("w")
    res = mover.result.call_one().get(timeout=60)
    assert res["error"] is not None and res["error"][0] == "OwnerDiedError", res
    t0 = time.monotonic()
    for op in ("read", "write"):
        mover.start.call_one(buf, op, 0, "cma").get(timeout=30)
        res = mover.result.call_one(A).get(timeout=30)
        assert res["error"] is not None and res["error"][0] == "OwnerDiedError", res
    assert time.monotonic() - t0 < 10


def test_owner_killed_mid_read_is_owner_died(duo, doomed):
    _, mover = duo
    buf = doomed.make.call_one("r", BIG, A).get(timeout=60)
    mover.start.call_one(buf, "read", 0, "cma").get(timeout=30)
    doomed.die_in_flight.broadcast("r")
    res = mover.result.call_one(A).get(timeout=60)
    assert res["error"] is not None and res["error"][0] == "OwnerDiedError", res


def test_drop_is_bounded_and_keeps_the_memory_past_the_bound():
    """A lease never given back (a live holder): drop() fails after DROP_WAIT with
    RDMATimeoutError, the buffer is dropped but its memory stays referenced; once
    the lease goes, the next registration lets it go."""
    import gc
    import weakref

    from monarch_cy._rdma_buffer import _leases
    from monarch_cy.rdma import BufferDroppedError, RDMABuffer, RDMATimeoutError
    a = np.zeros(4096, np.uint8)
    ref = weakref.ref(a)
    buf = RDMABuffer(a)
    del a
    table = _leases.remote(buf._h)
    slot = _leases.claim(table, buf._h)
    old, _leases.DROP_WAIT = _leases.DROP_WAIT, 0.3
    try:
        t0 = time.monotonic()
        with pytest.raises(RDMATimeoutError, match=r"still had operations on it in flight"):
            buf.drop().get(timeout=10)
        assert 0.25 < time.monotonic() - t0 < 3
        gc.collect()
        assert ref() is not None                        # not released under a lease
        copy = RDMABuffer._from_handle(buf._h)
        with pytest.raises(BufferDroppedError):
            copy.read_into(np.zeros(4096, np.uint8), backend="cma").get(timeout=10)
        table.release(slot)
        other = RDMABuffer(np.zeros(8, np.uint8))       # sweeps the dropped ones
        gc.collect()
        assert ref() is None
        other.drop().get(timeout=5)
        assert buf.drop().get(timeout=5) is None        # idempotent still
    finally:
        _leases.DROP_WAIT = old


def test_drop_does_not_wait_for_a_dead_lease_holder():
    """A process that died holding a lease does not hold up drop()."""
    import gc
    import weakref

    from monarch_cy.rdma import RDMABuffer
    a = np.zeros(4096, np.uint8)
    ref = weakref.ref(a)
    buf = RDMABuffer(a)
    del a
    from monarch_cy.actor import this_host
    procs = this_host().spawn_procs(per_host={"procs": 1})
    try:
        victim = procs.spawn("victim", Mover)
        victim.hold_lease_and_die.broadcast(buf)
        from monarch_cy._rdma_buffer import _leases
        end = time.monotonic() + 10
        while not _leases.own().table.holders(buf._h.cell) and time.monotonic() < end:
            time.sleep(0.01)
        assert _leases.own().table.holders(buf._h.cell), "the victim claimed no lease"
        time.sleep(0.5)                                  # it is gone by now
        t0 = time.monotonic()
        assert buf.drop().get(timeout=10) is None
        assert time.monotonic() - t0 < 2
        gc.collect()
        assert ref() is None
        assert not _leases.own().table.holders(buf._h.cell)
    finally:
        procs.stop().get(timeout=20)


@pytest.mark.parametrize("how", ["grow", "storage0"])
@pytest.mark.parametrize("backend", ["cma", "tcp"])
def test_resized_tensor_fails_clearly(duo, backend, how):
    """A registered tensor whose storage is reallocated (resize_ growing it, or its
    storage resized to 0 as FSDP does): operations fail with RDMAError naming the
    buffer -- never a raw OSError, never a write into the freed memory."""
    pytest.importorskip("torch")
    dropper, mover = duo
    name = f"rs-{backend}-{how}"
    buf = dropper.make.call_one(name, 64 * MiB, A, True, "torch").get(timeout=60)
    dropper.resize.call_one(name, how).get(timeout=30)
    for op in ("read", "write"):
        mover.start.call_one(buf, op, C, backend).get(timeout=30)
        err = mover.result.call_one(A).get(timeout=60)["error"]
        assert err is not None and err[0] == "RDMAError", err
        assert f"buffer {buf._h.buf_id} of {buf.owner}" in err[1], err
        assert ("moved" in err[1] or "unmapped" in err[1]), err
    buf.drop().get(timeout=30)


def test_resized_tensor_same_process():
    torch = pytest.importorskip("torch")
    from monarch_cy.rdma import RDMABuffer, RDMAError
    t = torch.zeros(1 << 16, dtype=torch.uint8)
    buf = RDMABuffer(t)
    t.resize_(1 << 20)
    with pytest.raises(RDMAError, match=r"buffer \d+ of .*moved"):
        buf.read_into(np.zeros(1 << 16, np.uint8)).get(timeout=10)
    with pytest.raises(RDMAError, match="resize_"):
        buf.write_from(np.ones(10, np.uint8)).get(timeout=10)
    buf.drop().get(timeout=10)
