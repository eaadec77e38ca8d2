"""The verbs tier on a machine without RDMA: imports, clear errors, bad input.

Runs anywhere.  Cases that need libibverbs itself (Debian ``libibverbs1``) skip
without it; cases that need "no RDMA device here" skip on a machine that has
one.  Every argument check below fires before any verbs call, so none of them
needs a device.
"""

from __future__ import annotations

import mmap
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from monarch_cy import MonarchCyError, _rdma
from monarch_cy._verbs import (
    Context, QPEndpoint, RemoteRegion, VerbsError, VerbsTimeout, VerbsUnavailable,
    list_devices, pick_gid_index, pin_buffer, split_ops, unavailable_reason,
)

REPO = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=REPO)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _libibverbs_loads() -> bool:
    try:
        _rdma.load()
    except VerbsUnavailable:
        return False
    return True


def _has_rdma_devices() -> bool:
    p = Path("/sys/class/infiniband_verbs")
    return p.is_dir() and any(x.name.startswith("uverbs") for x in p.iterdir())


needs_lib = pytest.mark.skipif(not _libibverbs_loads(),
                               reason="libibverbs.so.1 is not installed (apt-get install libibverbs1)")
needs_no_device = pytest.mark.skipif(_has_rdma_devices(), reason="this machine has RDMA devices")


# ------------------------------------------------------------------ import and loading

def test_imports_load_no_libibverbs():
    out = _run(
        "import monarch_cy, monarch_cy._rdma, monarch_cy._verbs\n"
        "print('libibverbs' in open('/proc/self/maps').read(), monarch_cy._rdma.is_loaded())")
    assert out.split() == ["False", "False"]


def test_bad_library_path_is_a_clear_remembered_error():
    out = _run(
        "from monarch_cy import _rdma\n"
        "from monarch_cy._verbs import VerbsUnavailable\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        _rdma.load('/nonexistent/libibverbs.so.1')\n"
        "    except VerbsUnavailable as e:\n"
        "        print(repr(str(e)), id(e))\n"
        "try:\n"
        "    _rdma.device_names()\n"
        "except VerbsUnavailable as e:\n"
        "    print('later', id(e))\n")
    lines = out.splitlines()
    assert "/nonexistent/libibverbs.so.1" in lines[0] and "install rdma-core" in lines[0]
    ids = {line.split()[-1] for line in lines}
    assert len(ids) == 1, "a failed load must be remembered, not retried"


@needs_lib
@needs_no_device
def test_no_device_errors_name_the_reason():
    with pytest.raises(VerbsUnavailable) as ei:
        _rdma.device_names()
    assert ei.value.name == "ENOSYS" and "no RDMA" in str(ei.value)
    assert isinstance(ei.value, RuntimeError) and isinstance(ei.value, MonarchCyError)
    assert list_devices() == []
    assert "no RDMA" in unavailable_reason()
    with pytest.raises(VerbsUnavailable, match="no RDMA"):
        Context()
    with pytest.raises(VerbsUnavailable, match="no RDMA"):
        _rdma.open_device("rxe0")


@needs_lib
def test_completion_error_carries_the_status_name():
    e = _rdma.completion_error(10, 77, 0x12)
    assert (e.status, e.name, e.call, e.wr_id) == (10, "IBV_WC_REM_ACCESS_ERR", "completion", 77)
    assert "remote access error" in e.message and "0x12" in e.message
    assert _rdma.wc_status_name(5) == "IBV_WC_WR_FLUSH_ERR"
    assert _rdma.wc_status_name(99) == "IBV_WC_99"
    assert isinstance(_rdma.has_dmabuf(), bool)


@pytest.mark.parametrize("err", [
    VerbsError(10, "IBV_WC_REM_ACCESS_ERR", "remote access error", "completion", 3),
    VerbsError(22, "EINVAL", "Invalid argument", "ibv_reg_mr"),
    VerbsUnavailable("no RDMA devices: because", 38, "ENOSYS", "ibv_get_device_list"),
    VerbsTimeout(110, "ETIMEDOUT", "0 of 1 completions arrived", "wait"),
])
def test_errors_pickle_with_attributes(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
    assert (back.status, back.name, back.message, back.call, back.wr_id) == \
        (err.status, err.name, err.message, err.call, err.wr_id)
    assert isinstance(back, MonarchCyError)


def test_error_bases():
    assert issubclass(VerbsTimeout, TimeoutError) and issubclass(VerbsTimeout, VerbsError)
    assert issubclass(VerbsUnavailable, RuntimeError) and issubclass(VerbsUnavailable, VerbsError)


# ------------------------------------------------------------------ bad input, flat tier

GOOD = (0x10000, 1, 0x20000, 2, 4096)


@pytest.mark.parametrize("op, match", [
    ((0x10000, 1, 0x20000, 2, -1), r"ops\[0\] length must be in 1\.\.2147483648, got -1"),
    ((0x10000, 1, 0x20000, 2, 0), r"ops\[0\] length .* got 0"),
    ((0x10000, 1, 0x20000, 2, (1 << 31) + 1), r"ops\[0\] length .* got 2147483649"),
    ((0x10000, 1, 0x20000, 2, 1 << 40), r"ops\[0\] length"),
    ((0, 1, 0x20000, 2, 16), r"ops\[0\] local_addr must be in 1\.\."),
    ((-5, 1, 0x20000, 2, 16), r"ops\[0\] local_addr"),
    (((1 << 64) - 8, 1, 0x20000, 2, 16), r"ops\[0\] local_addr"),
    ((0x10000, 1, (1 << 64) - 8, 2, 16), r"ops\[0\] remote_addr"),
    ((0x10000, 1 << 32, 0x20000, 2, 16), r"ops\[0\] lkey must be in 0\.\.4294967295"),
    ((0x10000, 1, 0x20000, -1, 16), r"ops\[0\] rkey"),
])
def test_workbatch_refuses_bad_ranges(op, match):
    with pytest.raises(ValueError, match=match):
        _rdma.WorkBatch(_rdma.OP_READ, [op])


def test_workbatch_names_the_bad_entry_and_type():
    with pytest.raises(ValueError, match=r"ops\[2\] length"):
        _rdma.WorkBatch(_rdma.OP_WRITE, [GOOD, GOOD, GOOD[:4] + (-3,)])
    with pytest.raises(TypeError, match=r"ops\[1\] must be a tuple"):
        _rdma.WorkBatch(_rdma.OP_WRITE, [GOOD, [1, 2, 3, 4, 5]])
    with pytest.raises(TypeError, match=r"ops\[0\] length must be an int, got 4.5"):
        _rdma.WorkBatch(_rdma.OP_WRITE, [GOOD[:4] + (4.5,)])
    with pytest.raises(TypeError, match=r"ops\[0\] lkey must be an int, got True"):
        _rdma.WorkBatch(_rdma.OP_WRITE, [(0x10000, True, 0x20000, 2, 16)])
    with pytest.raises(ValueError, match="opcode must be OP_READ"):
        _rdma.WorkBatch(7, [GOOD])
    with pytest.raises(ValueError, match="at least one"):
        _rdma.WorkBatch(_rdma.OP_READ, [])


def test_workbatch_refuses_unregistered_local_memory():
    regions = {1: (0x10000, 8192)}
    b = _rdma.WorkBatch(_rdma.OP_READ, [GOOD, (0x11000, 1, 0, 2, 4096)], regions, 100)
    assert (len(b), b.nbytes, b.wr_id_base) == (2, 8192, 100)
    with pytest.raises(ValueError, match=r"ops\[0\].*lkey 0x5, which is not a registered"):
        _rdma.WorkBatch(_rdma.OP_READ, [(0x10000, 5, 0, 2, 16)], regions)
    with pytest.raises(ValueError, match=r"ops\[0\]: local range \[0x11000, 0x12001\) lies outside"):
        _rdma.WorkBatch(_rdma.OP_READ, [(0x11000, 1, 0, 2, 4097)], regions)
    with pytest.raises(ValueError, match="lies outside"):
        _rdma.WorkBatch(_rdma.OP_READ, [(0xF000, 1, 0, 2, 4096)], regions)


def test_registration_arguments_checked_before_any_verbs_call():
    with pytest.raises(ValueError, match=r"length must be in 1\.\.\d+, got -1"):
        _rdma.reg_mr(1, 0x1000, -1)
    with pytest.raises(ValueError, match="length must be in 1"):
        _rdma.reg_mr(1, 0x1000, 0)
    with pytest.raises(ValueError, match="length"):
        _rdma.reg_mr(1, 0x1000, 1 << 63)
    with pytest.raises(ValueError, match="addr must be in 1"):
        _rdma.reg_mr(1, 0, 16)
    with pytest.raises(ValueError, match="overflows 64 bits"):
        _rdma.reg_mr(1, (1 << 64) - 16, 1 << 20)
    with pytest.raises(ValueError, match="pd must be a live handle"):
        _rdma.reg_mr(0, 0x1000, 16)
    with pytest.raises(TypeError, match="pd must be an int handle"):
        _rdma.reg_mr("pd", 0x1000, 16)
    with pytest.raises(ValueError, match=r"fd must be an open dma-buf file descriptor \(>= 0\), got -1"):
        _rdma.reg_dmabuf_mr(1, 0, 4096, 0, -1)
    with pytest.raises(ValueError, match="offset"):
        _rdma.reg_dmabuf_mr(1, -4096, 4096, 0, 3)
    with pytest.raises(ValueError, match="ctx must be a live handle"):
        _rdma.create_cq(0, 16)
    with pytest.raises(ValueError, match="cqe must be >= 1"):
        _rdma.create_cq(1, 0)
    with pytest.raises(ValueError, match="max_send_wr must be >= 1"):
        _rdma.create_rc_qp(1, 1, 0)


def test_connect_and_datapath_arguments():
    kw = dict(port=1, gid_index=1, mtu=1024, local_psn=1, remote_qp_num=17, remote_lid=0,
              remote_gid=bytes(16), remote_psn=2)
    with pytest.raises(ValueError, match="mtu must be one of"):
        _rdma.connect_rc_qp(1, **{**kw, "mtu": 1500})
    with pytest.raises(ValueError, match="remote_gid must be 16 bytes, got 4"):
        _rdma.connect_rc_qp(1, **{**kw, "remote_gid": b"abcd"})
    with pytest.raises(ValueError, match="remote_psn must fit in 24 bits"):
        _rdma.connect_rc_qp(1, **{**kw, "remote_psn": 1 << 24})
    with pytest.raises(ValueError, match="qp must be a live handle"):
        _rdma.connect_rc_qp(0, **kw)
    b = _rdma.WorkBatch(_rdma.OP_READ, [GOOD] * 4)
    with pytest.raises(ValueError, match="qp must be a live handle"):
        _rdma.post(0, b)
    with pytest.raises(ValueError, match=r"start=3, count=2 is not a range of the batch's 4"):
        _rdma.post(1, b, 3, 2)
    with pytest.raises(TypeError):
        _rdma.post(1, [GOOD])
    with pytest.raises(ValueError, match="count must be in 1"):
        _rdma.wait(1, 0)
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        _rdma.wait(1, 1, -1.0)
    with pytest.raises(ValueError, match="cq must be a live handle"):
        _rdma.wait(0, 1)
    with pytest.raises(ValueError, match="max_entries must be in 1..64"):
        _rdma.poll(1, 65)


# ------------------------------------------------------------------ bad input, owning tier

def test_pin_buffer_refuses_what_cannot_be_registered():
    with pytest.raises(ValueError, match="contiguous.*numpy.ascontiguousarray"):
        pin_buffer(np.zeros((8, 8))[:, ::2])
    with pytest.raises(ValueError, match="writable"):
        pin_buffer(b"read-only bytes")
    pin = pin_buffer(b"read-only bytes", writable=False)
    assert pin.nbytes == 15
    pin.release()
    with pytest.raises(TypeError, match="buffer protocol.*got object"):
        pin_buffer(object())
    with pytest.raises(ValueError, match="empty"):
        pin_buffer(bytearray())
    ba = bytearray(64)
    pin = pin_buffer(ba)
    with pytest.raises(BufferError):
        ba.append(1)                         # pinned: cannot move
    pin.release()
    ba.append(1)
    m = mmap.mmap(-1, 4096)
    pin = pin_buffer(m)
    assert pin.nbytes == 4096
    pin.release()
    m.close()


def test_records_round_trip_and_validate():
    ep = QPEndpoint(0x11, 0, bytes(10) + b"\xff\xff" + bytes([10, 91, 1, 1]), 0xABCDEF, 1024, 16)
    assert QPEndpoint.from_bytes(ep.to_bytes()) == ep
    assert pickle.loads(pickle.dumps(ep)) == ep
    assert len(ep.to_bytes()) == QPEndpoint.SIZE
    with pytest.raises(ValueError, match="gid must be 16 bytes"):
        QPEndpoint(1, 0, b"x", 1, 1024, 1)
    with pytest.raises(ValueError, match="mtu must be"):
        QPEndpoint(1, 0, bytes(16), 1, 1500, 1)
    with pytest.raises(ValueError, match="psn must fit in 24"):
        QPEndpoint(1, 0, bytes(16), 1 << 24, 1024, 1)
    with pytest.raises(ValueError, match="not a QPEndpoint"):
        QPEndpoint.from_bytes(b"XXXX" + ep.to_bytes()[4:])
    rr = RemoteRegion(0x7F0000001000, 1 << 20, 0x1234)
    assert RemoteRegion.from_bytes(rr.to_bytes()) == rr
    assert rr.slice(4096, 100) == (0x7F0000002000, 100)
    with pytest.raises(ValueError, match="outside the 1048576-byte remote region"):
        rr.slice((1 << 20) - 8, 64)
    with pytest.raises(ValueError, match="a RemoteRegion is 24 bytes"):
        RemoteRegion.from_bytes(b"short")


def test_split_ops():
    ops = split_ops([(0x1000, 1, 0x9000, 2, 10), (0x5000, 1, 0xA000, 2, 3)], 4)
    assert ops == [(0x1000, 1, 0x9000, 2, 4), (0x1004, 1, 0x9004, 2, 4), (0x1008, 1, 0x9008, 2, 2),
                   (0x5000, 1, 0xA000, 2, 3)]
    with pytest.raises(TypeError, match=r"ops\[0\] must be a tuple"):
        split_ops([[1, 2, 3, 4, 5]], 4)


def test_pick_gid_index_prefers_roce_v2_ipv4(tmp_path):
    port = tmp_path / "rxe0" / "ports" / "1"
    (port / "gids").mkdir(parents=True)
    (port / "gid_attrs" / "types").mkdir(parents=True)
    gids = {0: ("fe80:0000:0000:0000:2cbe:feff:fe47:38e3", "RoCE v2"),
            1: ("0000:0000:0000:0000:0000:ffff:0a5b:0001", "IB/RoCE v1"),
            2: ("0000:0000:0000:0000:0000:ffff:0a5b:0001", "RoCE v2"),
            3: ("0000:0000:0000:0000:0000:0000:0000:0000", None)}
    for i, (gid, kind) in gids.items():
        (port / "gids" / str(i)).write_text(gid + "\n")
        if kind:
            (port / "gid_attrs" / "types" / str(i)).write_text(kind + "\n")
    assert pick_gid_index("rxe0", 1, sysfs=tmp_path) == 2
    (port / "gid_attrs" / "types" / "2").write_text("IB/RoCE v1\n")
    assert pick_gid_index("rxe0", 1, sysfs=tmp_path) == 0       # RoCE v2, link-local
    assert pick_gid_index("mlx5_0", 1, sysfs=tmp_path) == 0     # nothing in sysfs


# ------------------------------------------------------------------ waiting with a liveness check

class _FakeDevice:
    """Stands in for ``_rdma.post``/``_rdma.wait``: request ``i`` completes at
    ``start + (i + 1) * every`` seconds (never when ``every`` is None); ``wait``
    has the real semantics, including losing what it consumed when it times out."""

    def __init__(self, every):
        import time
        self.time = time
        self.every, self.start = every, time.monotonic()
        self.posted = self.consumed = self.lost = 0

    def post(self, qp, batch, start, count):
        assert start == self.posted
        self.posted += count

    def _arrived(self):
        if self.every is None:
            return 0
        return min(self.posted, int((self.time.monotonic() - self.start) / self.every))

    def wait(self, cq, count, timeout):
        end = self.time.monotonic() + timeout
        while self._arrived() - self.consumed - self.lost < count:
            if self.time.monotonic() >= end:
                self.lost += self._arrived() - self.consumed - self.lost
                raise VerbsTimeout(110, "ETIMEDOUT", "fake", "wait")
            self.time.sleep(0.001)
        self.consumed += count
        return list(range(count))


def _fake_qp(monkeypatch, every, max_send_wr=4):
    from types import SimpleNamespace

    from monarch_cy._resource import Owned
    from monarch_cy._verbs import QueuePair, _qp
    dev = _FakeDevice(every)
    monkeypatch.setattr(_qp, "_rdma", SimpleNamespace(post=dev.post, wait=dev.wait))
    qp = QueuePair.__new__(QueuePair)
    Owned.__init__(qp)
    qp._qp, qp._cq, qp.max_send_wr, qp.connected = 1, 2, max_send_wr, True
    return qp, dev


def test_submit_check_ends_a_wait_the_device_would_not(monkeypatch):
    import time

    class Gone(Exception):
        pass

    qp, dev = _fake_qp(monkeypatch, None)     # nothing ever completes
    calls = []

    def check():
        calls.append(time.monotonic())
        if len(calls) == 3:
            raise Gone("peer died")
    t = time.monotonic()
    with pytest.raises(Gone):
        qp.submit(list(range(10)), timeout=30, check=check, check_interval=0.02)
    assert time.monotonic() - t < 2 and len(calls) == 3
    assert dev.posted == 4                    # one window posted, then abandoned


def test_submit_check_loses_no_completion_across_slices(monkeypatch):
    qp, dev = _fake_qp(monkeypatch, 0.015)    # slower than the check interval
    calls = []
    qp.submit(list(range(10)), timeout=30, check=lambda: calls.append(1), check_interval=0.004)
    assert (dev.posted, dev.consumed, dev.lost) == (10, 10, 0)
    assert calls, "check was never called while waiting"


def test_submit_check_still_times_out(monkeypatch):
    import time
    qp, _ = _fake_qp(monkeypatch, None)
    t = time.monotonic()
    with pytest.raises(VerbsTimeout):
        qp.submit([0], timeout=0.2, check=lambda: None, check_interval=0.05)
    assert 0.15 < time.monotonic() - t < 2
    with pytest.raises(TypeError, match="check must be callable"):
        qp.submit([0], check=1)
    with pytest.raises(ValueError, match="check_interval must be > 0"):
        qp.submit([0], check=lambda: None, check_interval=0)
