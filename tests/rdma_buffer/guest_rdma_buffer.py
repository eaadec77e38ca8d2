"""``RDMABuffer`` over its ``ibverbs`` backend, end to end, inside the soft-RoCE guest.

``python guest_rdma_buffer.py RESULTS.json --owner-device rxe0 --reader-device rxe1
--owner-link mcya0`` runs every check and writes ``{name: {"ok": bool, "detail": str,
"seconds": float, ...}}`` (``tests/rdma_buffer/test_buffer_guest.py`` asserts them).

This process is the controller of an actor job: it spawns procs with
``this_host().spawn_procs`` -- the *owner* mesh with ``MONARCH_CY_RDMA_DEVICE`` set
to the owner device, the *reader* mesh and the controller itself on the reader
device -- so every transfer between an owner and a reader leaves one rxe device,
crosses the veth links through the router namespace and arrives on the other.
Each transfer check records the owner link's byte counters around it (``veth``:
``[tx, rx]`` deltas) and asserts they moved by at least the bytes transferred.
Every operation passes ``backend="ibverbs"`` (or sets ``MONARCH_CY_RDMA_BACKEND``),
so nothing can fall back to ``cma`` or ``tcp``; data is compared by SHA-256.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from _guest_buffer_actors import Peer, pattern, sha  # noqa: E402
from _soft_roce_guest import write_results  # noqa: E402

MiB = 1 << 20
BIG = 8 * MiB + 17              # the main read: not a multiple of a page or a message
WRITE = 4 * MiB + 3


class Job:
    """The meshes, actors and settings the checks share."""

    def __init__(self, owner_device: str, reader_device: str, owner_link: str) -> None:
        self.owner_device, self.reader_device = owner_device, reader_device
        self.owner_link = owner_link
        self.meshes: list = []
        self.owner = self.reader = None
        self.bufs: dict = {}
        self.failures: list = []      # what reached the unhandled-fault hook

    def install_hook(self) -> None:
        """The checks kill owners on purpose: record mesh failures instead of raising
        them in the main thread (``check_stop`` asserts only those meshes failed)."""
        import monarch_cy.actor as actor
        actor.unhandled_fault_hook = self.failures.append

    def spawn(self, name: str, device: str, actor: str):
        from monarch_cy.actor import this_host
        # One emulated CPU runs every process: a proc busy importing can miss the
        # default 10 s heartbeat; give it two minutes.
        procs = this_host().spawn_procs(per_host={"procs": 1}, name=name,
                                        env={"MONARCH_CY_RDMA_DEVICE": device},
                                        heartbeat_timeout=120)
        self.meshes.append(procs)
        return procs.spawn(actor, Peer)

    def veth(self) -> tuple[int, int]:
        """``(tx, rx)`` bytes of the owner device's veth link so far."""
        base = Path("/sys/class/net") / self.owner_link / "statistics"
        return int((base / "tx_bytes").read_text()), int((base / "rx_bytes").read_text())


class Wire:
    """Counts what crossed the owner's link during a ``with`` block."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def __enter__(self):
        self.start = self.job.veth()
        return self

    def __exit__(self, *exc):
        end = self.job.veth()
        self.tx, self.rx = end[0] - self.start[0], end[1] - self.start[1]


def _expect_wire(out: dict, w: Wire, tx: int = 0, rx: int = 0) -> str:
    out["veth"] = [w.tx, w.rx]
    assert w.tx >= tx, f"only {w.tx} bytes left the owner's link (expected >= {tx})"
    assert w.rx >= rx, f"only {w.rx} bytes arrived on the owner's link (expected >= {rx})"
    return f"owner link tx/rx +{w.tx}/+{w.rx} bytes"


# ------------------------------------------------------------------ checks

def check_setup(job: Job, out: dict) -> str:
    """Spawn the meshes; each process reports the verbs device its backend opened."""
    from monarch_cy._rdma_buffer import _verbs_backend
    from monarch_cy.rdma import get_rdma_backend, is_ibverbs_available
    t = time.monotonic()
    job.owner = job.spawn("owners", job.owner_device, "owner")
    job.reader = job.spawn("readers", job.reader_device, "reader")
    o = job.owner.device.call_one().get(timeout=120)
    r = job.reader.device.call_one().get(timeout=120)
    spawn = time.monotonic() - t
    c = _verbs_backend.device_name()
    out["devices"] = {"owner": o["device"], "reader": r["device"], "controller": c}
    assert o["device"] == job.owner_device, o
    assert r["device"] == job.reader_device, r
    assert c == job.reader_device, c
    assert is_ibverbs_available()
    assert get_rdma_backend() == "ibverbs", get_rdma_backend()   # other hosts' default here
    assert o["pid"] != r["pid"] != os.getpid()
    return (f"procs spawned and answering in {spawn:.1f} s; verbs devices: owner proc "
            f"{o['device']} (pid {o['pid']}), reader proc {r['device']} (pid {r['pid']}), "
            f"controller {c}")


def check_worker_reads_worker(job: Job, out: dict) -> str:
    buf = job.owner.make.call_one("big", BIG, 1).get(timeout=60)
    job.bufs["big"] = buf
    assert buf.size() == BIG
    want = pattern(BIG, 1)
    with Wire(job) as w:
        n, digest, secs = job.reader.read.call_one(buf).get(timeout=120)
    assert n == BIG, n
    assert digest == sha(want), "bytes read differ from the owner's"
    wire = _expect_wire(out, w, tx=BIG)
    off = 12345
    n2, digest2, _ = job.reader.read.call_one(buf, off).get(timeout=120)
    assert (n2, digest2) == (BIG - off, sha(want[off:])), "read at an offset differs"
    qp = job.reader.queue_pair.call_one(buf.owner).get(timeout=30)
    assert qp is not None, "the reader has no queue pair to the owner"
    out["bytes"] = BIG
    return (f"reader proc read {BIG} bytes of the owner proc's numpy array in {secs:.2f} s "
            f"({BIG / secs / 1e6:.1f} MB/s, functional figure), sha256 equal; again from "
            f"offset {off}; {wire}; reader's queue pair {qp:#x}")


def check_worker_writes_worker(job: Job, out: dict) -> str:
    n = 8 * MiB
    buf = job.owner.make.call_one("w", n, 2).get(timeout=60)
    at = 1000
    with Wire(job) as w:
        secs = job.reader.write.call_one(buf, WRITE, 3, at).get(timeout=120)
    want = pattern(n, 2)
    want[at:at + WRITE] = pattern(WRITE, 3)
    assert job.owner.digest.call_one("w").get(timeout=60) == sha(want), \
        "the owner's array is not what was written (or bytes around it changed)"
    wire = _expect_wire(out, w, rx=WRITE)
    out["bytes"] = WRITE
    buf.drop().get(timeout=30)
    return (f"reader proc wrote {WRITE} bytes at offset {at} of the owner's {n}-byte array "
            f"in {secs:.2f} s, owner's sha256 equal (neighbours untouched); {wire}")


def check_controller_and_worker_both_ways(job: Job, out: dict) -> str:
    from monarch_cy.rdma import RDMABuffer
    buf = job.bufs["big"]
    dst = np.zeros(BIG, np.uint8)
    with Wire(job) as w1:
        assert buf.read_into(dst, backend="ibverbs", timeout=60).get(timeout=90) is None
    assert sha(dst) == sha(pattern(BIG, 1)), "controller's read differs"
    n = 2 * MiB
    wbuf = job.owner.make.call_one("cw", n, 6).get(timeout=60)
    with Wire(job) as w2:
        wbuf.write_from(pattern(MiB, 7), MiB, backend="ibverbs", timeout=60).get(timeout=90)
    want = pattern(n, 6)
    want[MiB:] = pattern(MiB, 7)
    assert job.owner.digest.call_one("cw").get(timeout=60) == sha(want), "controller's write differs"
    wbuf.drop().get(timeout=30)
    # The controller owns memory (on the reader device); the owner proc (the other
    # device) reads and writes it.
    mine = pattern(4 * MiB, 8)
    cbuf = RDMABuffer(mine)
    with Wire(job) as w3:
        got, digest, _ = job.owner.read.call_one(cbuf).get(timeout=120)
        job.owner.write.call_one(cbuf, 1000, 9, 50).get(timeout=120)
    assert (got, digest) == (4 * MiB, sha(pattern(4 * MiB, 8))), "proc's read of the controller differs"
    want = pattern(4 * MiB, 8)
    want[50:1050] = pattern(1000, 9)
    assert sha(mine) == sha(want), "proc's write into the controller's array differs"
    cbuf.drop().get(timeout=30)
    # Through the owner's link: controller read = tx, controller write = rx; the
    # controller's own buffer: read by the owner proc = rx, written by it = tx.
    out["veth"] = [w1.tx + w2.tx + w3.tx, w1.rx + w2.rx + w3.rx]
    assert w1.tx >= BIG and w2.rx >= MiB and w3.rx >= 4 * MiB and w3.tx >= 1000, \
        [(w1.tx, w1.rx), (w2.tx, w2.rx), (w3.tx, w3.rx)]
    return (f"controller read {BIG} bytes of the owner proc (link tx +{w1.tx}) and wrote 1 MiB "
            f"(rx +{w2.rx}); the owner proc read the controller's 4 MiB array (rx +{w3.rx}) and "
            "wrote 1000 bytes into it; all sha256 equal")


def check_action_batch(job: Job, out: dict) -> str:
    from monarch_cy.rdma import RDMAAction, RDMABuffer
    a = job.owner.make.call_one("ba", MiB, 10).get(timeout=60)
    b = job.owner.make.call_one("bb", 4096 + 5, 11).get(timeout=60)
    bw = job.owner.make.call_one("bw", 5000, 12).get(timeout=60)
    mine = pattern(2 * MiB, 13)
    c = RDMABuffer(mine)              # a second owner: the controller
    with Wire(job) as w:
        got = job.reader.batch.call_one([a, b, c], [(bw, 5000, 14)]).get(timeout=180)
    assert got == [sha(pattern(MiB, 10)), sha(pattern(4096 + 5, 11)), sha(mine)], \
        "batch reads differ"
    assert job.owner.digest.call_one("bw").get(timeout=60) == sha(pattern(5000, 14)), \
        "batch write differs"
    wire = _expect_wire(out, w, tx=MiB + 4096, rx=5000)
    # The controller's own batch, with the backend forced by the environment.
    os.environ["MONARCH_CY_RDMA_BACKEND"] = "ibverbs"
    try:
        assert a.backend_for() == "ibverbs"
        d1, d2 = np.zeros(MiB, np.uint8), np.zeros(4096 + 5, np.uint8)
        RDMAAction().read_into(a, d1).read_into(b, d2).write_from(bw, pattern(5000, 15)) \
            .submit(timeout=60).get(timeout=90)
    finally:
        del os.environ["MONARCH_CY_RDMA_BACKEND"]
    assert sha(d1) == sha(pattern(MiB, 10)) and sha(d2) == sha(pattern(4096 + 5, 11))
    assert job.owner.digest.call_one("bw").get(timeout=60) == sha(pattern(5000, 15))
    for x in (a, b, bw, c):
        x.drop().get(timeout=30)
    return ("reader proc's RDMAAction: 3 reads from 2 owners (owner proc, controller) and a "
            f"write, one submission, sha256 equal; {wire}; controller's RDMAAction with "
            "MONARCH_CY_RDMA_BACKEND=ibverbs: 2 reads and a write, equal")


def check_dropped_buffer(job: Job, out: dict) -> str:
    from monarch_cy.rdma import BufferDroppedError
    buf = job.owner.make.call_one("d", MiB, 16).get(timeout=60)
    n, digest, _ = job.reader.read.call_one(buf).get(timeout=60)
    assert (n, digest) == (MiB, sha(pattern(MiB, 16)))
    qp_before = job.reader.queue_pair.call_one(buf.owner).get(timeout=30)
    buf.drop().get(timeout=30)                # through the controller's copy
    job.owner.forget.call_one("d").get(timeout=30)
    errs = [job.reader.error.call_one(buf, op).get(timeout=60) for op in ("read", "write")]
    for e in errs:
        assert e is not None and e[0] == "BufferDroppedError" and "was dropped" in e[1], errs
    try:
        buf.read_into(np.zeros(MiB, np.uint8), backend="ibverbs")
    except BufferDroppedError:
        pass
    else:
        raise AssertionError("the dropping copy did not refuse at the call")
    # The failed completions killed the reader's queue pair; the next operation
    # on that owner reconnects and works.
    n, digest, _ = job.reader.read.call_one(job.bufs["big"]).get(timeout=120)
    assert (n, digest) == (BIG, sha(pattern(BIG, 1))), "read after the error differs"
    qp_after = job.reader.queue_pair.call_one(buf.owner).get(timeout=30)
    assert qp_after is not None and qp_after != qp_before, (qp_before, qp_after)
    return (f"after drop(): reader proc's read -> {errs[0][0]}: {errs[0][1]}; write -> "
            f"{errs[1][0]}; the dropping copy refuses at the call; the next read of that "
            f"owner reconnected (queue pair {qp_before:#x} -> {qp_after:#x}) and was equal")


def check_one_sided(job: Job, out: dict) -> str:
    """The owner process is stopped (SIGSTOP) while it is read and written: one-sided."""
    buf = job.bufs["big"]
    pid = job.owner.pid.call_one().get(timeout=30)
    dst = np.zeros(BIG, np.uint8)
    buf.read_into(dst, backend="ibverbs", timeout=60).get(timeout=90)   # connected
    os.kill(pid, signal.SIGSTOP)
    try:
        with Wire(job) as w:
            t = time.monotonic()
            dst[:] = 0
            assert buf.read_into(dst, backend="ibverbs", timeout=30).get(timeout=40) is None
            secs = time.monotonic() - t
    finally:
        os.kill(pid, signal.SIGCONT)
    assert sha(dst) == sha(pattern(BIG, 1)), "read from the stopped owner differs"
    wire = _expect_wire(out, w, tx=BIG)
    return (f"controller read {BIG} bytes in {secs:.2f} s while the owner proc was stopped "
            f"(SIGSTOP): the owner's code is not in the data path; {wire}")


def check_timeout(job: Job, out: dict) -> str:
    """A deadline shorter than the transfer: ``RDMATimeoutError``; the next read works."""
    from monarch_cy._rdma_buffer import _verbs_backend
    from monarch_cy.rdma import RDMATimeoutError
    buf = job.bufs["big"]
    dst = np.zeros(BIG, np.uint8)
    buf.read_into(dst, backend="ibverbs", timeout=60).get(timeout=90)   # connected
    qp_before = _verbs_backend.queue_pair_num(buf.owner)
    t = time.monotonic()
    try:
        buf.read_into(dst, backend="ibverbs", timeout=0.1).get(timeout=30)
    except RDMATimeoutError as e:
        took = time.monotonic() - t
        msg = f"{type(e).__name__} after {took:.2f} s: {e}"
    else:
        raise AssertionError(f"{BIG} bytes were read within 0.1 s; the check proves nothing")
    assert took < 5, msg
    dst[:] = 0
    assert buf.read_into(dst, backend="ibverbs", timeout=60).get(timeout=90) is None
    assert sha(dst) == sha(pattern(BIG, 1)), "read after the timeout differs"
    qp_after = _verbs_backend.queue_pair_num(buf.owner)
    assert None not in (qp_before, qp_after) and qp_after != qp_before, (qp_before, qp_after)
    return (f"{BIG}-byte read with timeout=0.1 -> {msg}; the next read reconnected (queue "
            f"pair {qp_before:#x} -> {qp_after:#x}) and was equal")


def _wait_known_dead(owner_key: str, within: float = 15.0) -> float:
    from monarch_cy._actor.base.state import get_node
    t = time.monotonic()
    while owner_key not in get_node().dead:
        assert time.monotonic() - t < within, "the runtime never learnt of the death"
        time.sleep(0.02)
    return time.monotonic() - t


def check_owner_killed(job: Job, out: dict) -> str:
    """Owner killed after readers connected: an ``OwnerDiedError``, fast, no hang."""
    from monarch_cy.rdma import OwnerDiedError
    doomed = job.spawn("doomed", job.owner_device, "doomed")
    buf = doomed.make.call_one("x", MiB, 17).get(timeout=120)
    assert job.reader.read.call_one(buf).get(timeout=60)[1] == sha(pattern(MiB, 17))
    dst = np.zeros(MiB, np.uint8)
    buf.read_into(dst, backend="ibverbs").get(timeout=60)
    doomed.die.broadcast()
    _wait_known_dead(buf.owner)
    t = time.monotonic()
    try:
        buf.read_into(dst, backend="ibverbs", timeout=30).get(timeout=40)
    except OwnerDiedError as e:
        mine = f"{type(e).__name__} after {time.monotonic() - t:.2f} s"
    else:
        raise AssertionError("read of a dead owner's buffer succeeded")
    e = job.reader.error.call_one(buf).get(timeout=60)
    assert e is not None and e[0] == "OwnerDiedError" and e[2] is True, e   # a SupervisionError
    assert e[3] < 10, e
    return f"controller -> {mine}; reader proc -> {e[0]} (a SupervisionError) after {e[3]:.2f} s: {e[1]}"


def check_owner_killed_during_read(job: Job, out: dict) -> str:
    """Owner SIGKILLed while a 64 MiB ibverbs read of it is on the wire."""
    from monarch_cy.rdma import OwnerDiedError
    n = 64 * MiB
    doomed = job.spawn("doomed2", job.owner_device, "doomed")
    buf = doomed.make.call_one("y", n, 18).get(timeout=120)
    pid = doomed.pid.call_one().get(timeout=30)
    dst = np.zeros(n, np.uint8)
    start = job.veth()[0]
    fut = buf.read_into(dst, backend="ibverbs", timeout=120)
    t = time.monotonic()
    while job.veth()[0] - start < 2 * MiB:        # the read is on the wire
        assert time.monotonic() - t < 30, "the read never started moving bytes"
        time.sleep(0.01)
    moved = job.veth()[0] - start
    assert not fut.done(), "the read finished before the kill; the check proves nothing"
    os.kill(pid, signal.SIGKILL)
    t = time.monotonic()
    try:
        fut.get(timeout=60)
    except OwnerDiedError as e:
        took = time.monotonic() - t
        msg = str(e)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"expected OwnerDiedError, got {type(e).__name__} "
                             f"{time.monotonic() - t:.2f} s after the kill: {e}") from e
    else:
        raise AssertionError("the read of a killed owner completed")
    assert took < 15, f"the error took {took:.1f} s"
    out["error_seconds"] = round(took, 3)
    return (f"owner killed after {moved} of {n} bytes had left its link: OwnerDiedError "
            f"{took:.2f} s after the kill: {msg}")


def check_reader_killed(job: Job, out: dict) -> str:
    """A reader proc dies: the owner closes the queue pair it held for it (it is
    passive on the wire, so only the runtime's death notice can free it)."""
    doomed = job.spawn("doomedr", job.reader_device, "doomedr")
    key = doomed.proc_key.call_one().get(timeout=60)
    got = doomed.read.call_one(job.bufs["big"]).get(timeout=120)
    assert got[1] == sha(pattern(BIG, 1)), "the doomed reader read wrong data"
    assert key in job.owner.peers.call_one().get(timeout=30), "no queue pair for the reader"
    doomed.die.broadcast()
    t = time.monotonic()
    while key in job.owner.peers.call_one().get(timeout=30):
        assert time.monotonic() - t < 15, "the owner kept the dead reader's queue pair"
        time.sleep(0.05)
    return f"reader {key} killed; the owner closed its queue pair {time.monotonic() - t:.2f} s later"


def check_stop(job: Job, out: dict) -> str:
    for b in job.bufs.values():
        b.drop().get(timeout=30)
    for m in job.meshes:
        m.stop().get(timeout=60)
    failed = sorted({f.mesh_name.rsplit("-", 1)[0] for f in job.failures})   # name-<id>
    assert set(failed) <= {"doomed", "doomed2", "doomedr"}, [f.report() for f in job.failures]
    return f"{len(job.meshes)} meshes stopped; failures reported: only the killed owners' {failed}"


CHECKS = [check_setup, check_worker_reads_worker, check_worker_writes_worker,
          check_controller_and_worker_both_ways, check_action_batch, check_dropped_buffer,
          check_one_sided, check_timeout, check_owner_killed, check_owner_killed_during_read,
          check_reader_killed, check_stop]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?")
    ap.add_argument("--owner-device", default="rxe0")
    ap.add_argument("--reader-device", default="rxe1")
    ap.add_argument("--owner-link", default="mcya0")
    ap.add_argument("--only", default="", help="comma-separated check names (setup always runs)")
    args = ap.parse_args()
    # The controller reads and writes from the reader device; set before any verbs use.
    os.environ["MONARCH_CY_RDMA_DEVICE"] = args.reader_device
    os.environ.pop("MONARCH_CY_RDMA_BACKEND", None)
    job = Job(args.owner_device, args.reader_device, args.owner_link)
    job.install_hook()
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    results: dict[str, dict] = {}
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        if only and name not in only and name != "setup":
            continue
        out: dict = {}
        t = time.monotonic()
        try:
            out["detail"] = check(job, out)
            out["ok"] = True
        except Exception:  # noqa: BLE001 - every failure is reported, the rest still run
            out.update(ok=False, detail=traceback.format_exc())
        out["seconds"] = round(time.monotonic() - t, 3)
        results[name] = out
        print(f"[guest] {name}: {'ok' if out['ok'] else 'FAILED'} ({out['seconds']} s) "
              f"{out['detail'][:300]}", flush=True)
        if name == "setup" and not out["ok"]:
            break
    return write_results(results, args.results)


if __name__ == "__main__":
    sys.exit(main())
