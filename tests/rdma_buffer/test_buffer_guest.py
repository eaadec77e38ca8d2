"""``RDMABuffer`` over the ``ibverbs`` backend, end to end, in the soft-RoCE guest.

Same boot as ``test_verbs_guest.py`` (the ``rdma_guest`` fixture runs both jobs).
Inside the guest a controller spawns procs through the actor runtime: an owner
proc on ``rxe0`` hands out ``RDMABuffer`` handles over numpy arrays; a reader
proc and the controller, on ``rxe1``, ``read_into``/``write_from`` them with
``backend="ibverbs"`` (and the other way round: the owner proc reads and writes
the controller's array), one ``RDMAAction`` spans two owners, and the error
paths run for real -- a dropped buffer (``BufferDroppedError``, then the queue
pair reconnects), a deadline too short (``RDMATimeoutError``), an owner killed
before a read and one killed while a 64 MiB read of it is on the wire
(``OwnerDiedError`` within seconds, no hang).  Data is compared by SHA-256; the
owner link's byte counters are recorded around each transfer.  The checks live
in ``guest_rdma_buffer.py``; each test here asserts its results.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MiB = 1 << 20
BIG = 8 * MiB + 17              # guest_rdma_buffer.BIG
WRITE = 4 * MiB + 3             # guest_rdma_buffer.WRITE

CHECKS = ["setup", "worker_reads_worker", "worker_writes_worker",
          "controller_and_worker_both_ways", "action_batch", "dropped_buffer", "one_sided",
          "timeout", "owner_killed", "owner_killed_during_read", "reader_killed", "stop"]


def _results(rdma_guest) -> dict:
    res = rdma_guest.buffer_results
    assert res, ("guest_rdma_buffer.py wrote no results; job log tail:\n"
                 f"{rdma_guest.log[-4000:]}")
    return res


@pytest.mark.parametrize("name", CHECKS)
def test_buffer_check(rdma_guest, name):
    res = _results(rdma_guest)
    assert name in res, f"check {name!r} did not run; job log tail:\n{rdma_guest.log[-3000:]}"
    assert res[name]["ok"], f"{name} failed in the guest:\n{res[name]['detail']}"


def test_the_two_sides_use_different_devices(rdma_guest):
    devices = _results(rdma_guest)["setup"]["devices"]
    assert devices == {"owner": "rxe0", "reader": "rxe1", "controller": "rxe1"}, devices


def test_bytes_crossed_the_owner_link(rdma_guest):
    """Each transfer moved at least its bytes through the owner device's veth link
    (``[tx, rx]``: reads of the owner leave it, writes arrive on it)."""
    res = _results(rdma_guest)
    tx, rx = res["worker_reads_worker"]["veth"]
    assert tx >= BIG, tx
    tx, rx = res["worker_writes_worker"]["veth"]
    assert rx >= WRITE, rx
    tx, rx = res["controller_and_worker_both_ways"]["veth"]
    assert tx >= BIG + 1000 and rx >= MiB + 4 * MiB, (tx, rx)
    tx, rx = res["action_batch"]["veth"]
    assert tx >= MiB + 4096 and rx >= 5000, (tx, rx)
    tx, rx = res["one_sided"]["veth"]
    assert tx >= BIG, tx


def test_error_paths_raise_the_documented_errors(rdma_guest):
    res = _results(rdma_guest)
    assert "-> BufferDroppedError" in res["dropped_buffer"]["detail"]
    assert "reconnected" in res["dropped_buffer"]["detail"]
    assert "RDMATimeoutError" in res["timeout"]["detail"]
    assert "OwnerDiedError (a SupervisionError)" in res["owner_killed"]["detail"]
    during = res["owner_killed_during_read"]
    assert "OwnerDiedError" in during["detail"]
    assert during["error_seconds"] < 15, during
