"""RDMABuffer between real processes: each backend forced in turn, batches, failures."""

from __future__ import annotations

import time

import numpy as np
import pytest

from _rdma_actors import Staller, pattern
from monarch_cy.rdma import (BufferDroppedError, OwnerDiedError, RDMABuffer,
                             RDMATimeoutError)

BACKENDS = ["cma", "tcp", None]      # None: auto (cma here)
MiB = 1 << 20


@pytest.mark.parametrize("kind", ["numpy", "torch", "memoryview"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_worker_reads_worker(pair, kind, backend):
    holder, reader = pair
    n = 3 * MiB + 17                 # not a multiple of any chunk
    buf = holder.make.call_one(f"r-{kind}-{backend}", n, 11, kind).get(timeout=20)
    assert buf.size() == n
    got = reader.read.call_one(buf, backend=backend).get(timeout=30)
    assert got == pattern(n, 11).tobytes()
    got = reader.read.call_one(buf, offset=12345, backend=backend).get(timeout=30)
    assert got == pattern(n, 11).tobytes()[12345:]
    buf.drop().get(timeout=10)


def test_auto_backend_is_cma_between_procs_of_this_host(pair):
    holder, reader = pair
    buf = holder.make.call_one("auto", 100, 1).get(timeout=20)
    assert reader.backend.call_one(buf).get(timeout=20) == "cma"
    assert reader.backend.call_one(buf, "tcp").get(timeout=20) == "tcp"
    assert buf.backend_for() == "cma"            # controller -> worker
    assert reader.default_backend.call_one().get(timeout=20) == "tcp"   # no verbs here
    buf.drop().get(timeout=10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_worker_writes_worker(pair, backend):
    holder, reader = pair
    n = 2 * MiB
    buf = holder.make.call_one(f"w-{backend}", n, 3).get(timeout=20)
    data = pattern(MiB + 5, 99).tobytes()
    reader.write.call_one(buf, data, 1000, backend=backend).get(timeout=30)
    want = bytearray(pattern(n, 3).tobytes())
    want[1000:1000 + len(data)] = data
    assert holder.digest.call_one(f"w-{backend}").get(timeout=20) == bytes(want)
    buf.drop().get(timeout=10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_controller_and_worker_both_ways(pair, backend):
    holder, reader = pair
    n = MiB + 3
    # controller reads and writes a worker's buffer
    buf = holder.make.call_one(f"c-{backend}", n, 5).get(timeout=20)
    dst = np.zeros(n, np.uint8)
    assert buf.read_into(dst, backend=backend).get(timeout=30) is None
    assert dst.tobytes() == pattern(n, 5).tobytes()
    buf.write_from(np.full(10, 42, np.uint8), n - 10, backend=backend).get(timeout=30)
    assert holder.digest.call_one(f"c-{backend}").get(timeout=20)[-10:] == bytes([42] * 10)
    buf.drop().get(timeout=10)
    # a worker reads and writes the controller's buffer
    mine = pattern(n, 8)
    cbuf = RDMABuffer(mine)
    assert reader.read.call_one(cbuf, backend=backend).get(timeout=30) == mine.tobytes()
    reader.write.call_one(cbuf, b"\x07" * 100, 50, backend=backend).get(timeout=30)
    assert (mine[50:150] == 7).all() and (mine[:50] == pattern(n, 8)[:50]).all()
    cbuf.drop().get(timeout=10)


@pytest.mark.parametrize("backend", ["cma", "tcp"])
def test_action_batches_reads_and_writes(pair, backend, monkeypatch):
    holder, reader = pair
    a = holder.make.call_one(f"ba-{backend}", MiB, 1).get(timeout=20)
    b = holder.make.call_one(f"bb-{backend}", 4096, 2).get(timeout=20)
    mine = pattern(3 * MiB, 3)
    c = RDMABuffer(mine)                         # owned by the controller: another owner
    w = holder.make.call_one(f"bw-{backend}", 5000, 4).get(timeout=20)
    got = reader.batch.call_one([a, b, c], [(w, b"\x09" * 5000)], backend).get(timeout=60)
    assert got == [pattern(MiB, 1).tobytes(), pattern(4096, 2).tobytes(), mine.tobytes()]
    assert holder.digest.call_one(f"bw-{backend}").get(timeout=20) == b"\x09" * 5000
    # the controller batches too, with the backend forced by the environment
    from monarch_cy.rdma import RDMAAction
    monkeypatch.setenv("MONARCH_CY_RDMA_BACKEND", backend)
    d1, d2 = np.zeros(MiB, np.uint8), np.zeros(4096, np.uint8)
    RDMAAction().read_into(a, d1).read_into(b, d2).submit().get(timeout=30)
    assert a.backend_for() == backend
    assert d1.tobytes() == pattern(MiB, 1).tobytes() and d2.tobytes() == pattern(4096, 2).tobytes()
    for x in (a, b, c, w):
        x.drop().get(timeout=10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reading_a_dropped_buffer(pair, backend):
    holder, reader = pair
    buf = holder.make.call_one(f"d-{backend}", 1000, 1).get(timeout=20)
    assert len(reader.read.call_one(buf, backend=backend).get(timeout=30)) == 1000
    buf.drop().get(timeout=10)                   # dropped through the controller's copy
    err = reader.read_error.call_one(buf, backend=backend).get(timeout=30)
    assert err[0] == "BufferDroppedError" and "was dropped" in err[1], err
    with pytest.raises(BufferDroppedError):
        buf.read_into(np.zeros(1000, np.uint8))  # this copy knows: raises at the call


def test_cma_refused_falls_back_to_tcp(pair):
    holder, reader = pair
    buf = holder.make.call_one("eperm", 2 * MiB, 6).get(timeout=20)
    before, after, data, forced = reader.read_with_eperm.call_one(buf).get(timeout=60)
    assert (before, after) == ("cma", "tcp")
    assert data == pattern(2 * MiB, 6).tobytes()
    assert forced == "BackendUnavailableError"
    buf.drop().get(timeout=10)


@pytest.fixture
def doomed():
    from monarch_cy.actor import this_host
    procs = this_host().spawn_procs(per_host={"procs": 1})
    yield procs.spawn("doomed", Staller)
    procs.stop().get(timeout=10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_owner_dead_is_an_error_not_a_hang(pair, doomed, backend):
    _, reader = pair
    buf = doomed.make.call_one("x", MiB, 2).get(timeout=20)
    doomed.die.broadcast()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:          # wait until the runtime knows
        from monarch_cy._actor.base.state import get_node
        if buf.owner in get_node().dead:
            break
        time.sleep(0.02)
    t0 = time.monotonic()
    with pytest.raises(OwnerDiedError, match="died"):
        buf.read_into(np.zeros(MiB, np.uint8), backend=backend, timeout=20).get(timeout=20)
    err = reader.read_error.call_one(buf, backend=backend).get(timeout=30)
    assert err[0] == "OwnerDiedError" and err[2] is True, err   # a SupervisionError
    assert time.monotonic() - t0 < 10


def test_owner_dying_during_a_pending_read_wakes_the_reader(doomed):
    buf = doomed.make.call_one("y", MiB, 2).get(timeout=20)
    doomed.stall.call_one().get(timeout=20)      # its service stops answering
    fut = buf.read_into(np.zeros(MiB, np.uint8), backend="tcp", timeout=30)
    time.sleep(0.3)
    assert not fut.done()
    t0 = time.monotonic()
    doomed.die.broadcast()
    with pytest.raises(OwnerDiedError):
        fut.get(timeout=15)
    assert time.monotonic() - t0 < 5


def test_unanswered_read_times_out(doomed):
    buf = doomed.make.call_one("z", 1000, 2).get(timeout=20)
    doomed.stall.call_one().get(timeout=20)
    t0 = time.monotonic()
    with pytest.raises(RDMATimeoutError, match="did not complete within its timeout"):
        buf.read_into(np.zeros(1000, np.uint8), backend="tcp", timeout=0.5).get(timeout=10)
    assert 0.4 < time.monotonic() - t0 < 5
