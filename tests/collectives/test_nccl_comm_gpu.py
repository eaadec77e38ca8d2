"""NCCL/RCCL on one real GPU (nranks = 1): every op, both buffer kinds, streams,
split, teardown, and a bounded init when a second rank never joins.
Marked `gpu`: skipped with the reason where there is none."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

from monarch_cy._errors import ResourceClosedError  # noqa: E402
from monarch_cy.collectives import (  # noqa: E402
    CollectiveTimeout,
    GroupAbortedError,
    NcclCommunicator,
    UniqueId,
    make_group,
)

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.float64]


@pytest.fixture(scope="module")
def comm():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA/ROCm device")
    c = make_group("nccl", 0, 1, UniqueId.generate(), device=0, timeout=60)
    yield c
    c.close()


def test_binding_and_identity(comm):
    from monarch_cy import _nccl_shim
    from monarch_cy._collectives._nccl_loader import current

    b = current()
    assert b is not None and b.version >= 21300
    print("bound", b.library, b.version_text, "from", b.source, b.path)
    assert (comm.rank, comm.size, comm.device) == (0, 1, 0)
    assert _nccl_shim.commCount(comm.handle) == 1 and _nccl_shim.commCuDevice(comm.handle) == 0
    assert comm.nonblocking == _nccl_shim.has("CommInitRankConfig")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_op(comm, dtype):
    src = (torch.arange(8, device="cuda:0") % 5 + 1).to(dtype)
    for op in ("sum", "avg", "max", "min", "prod"):
        t = src.clone()
        comm.all_reduce(t, op)
        assert torch.equal(t, src), op
    t = src.clone()
    comm.broadcast(t, root=0)
    assert torch.equal(t, src)
    t = src.clone()
    comm.reduce(t, root=0, op="max")
    assert torch.equal(t, src)
    out = torch.empty_like(src)
    comm.all_gather(out, src)
    assert torch.equal(out, src)
    out = torch.zeros_like(src)
    comm.reduce_scatter(out, src, op="sum")
    assert torch.equal(out, src)
    comm.barrier()


def test_device_buffer_with_dtype_and_streams(comm):
    from monarch_cy.gpu import DeviceBuffer, Stream

    buf = DeviceBuffer(64, 0)
    try:
        view = buf.to_torch(torch.float32)
        view.fill_(3.0)
        torch.cuda.synchronize()
        comm.all_reduce(buf, "sum", dtype="float32")
        assert view.tolist() == [3.0] * 16
        with pytest.raises(TypeError, match="pass dtype="):
            comm.all_reduce(buf)
        with pytest.raises(ValueError, match="not a whole number of float64"):
            comm.all_reduce(DeviceBuffer(12, 0), dtype="float64")
        s = Stream(0)
        w = comm.all_reduce(buf, dtype=torch.float32, stream=s, async_op=True)
        w.wait()
        assert w.is_completed()
        s.close()
    finally:
        buf.close()
    ts = torch.cuda.Stream()
    t = torch.ones(1024, device="cuda:0")
    w = comm.all_reduce(t, stream=ts, async_op=True)
    w.wait(timeout=30)
    assert t.sum().item() == 1024


def test_split(comm):
    child = comm.split(0, key=5)
    assert (child.rank, child.size) == (0, 1)
    t = torch.ones(4, device="cuda:0")
    child.all_reduce(t)
    assert t.tolist() == [1.0] * 4
    child.close()
    assert comm.split(None) is None


def test_bad_input(comm):
    with pytest.raises(ValueError, match="tensor is on the host; this communicator is on device 0"):
        comm.all_reduce(torch.ones(2))
    with pytest.raises(ValueError, match="contiguous"):
        comm.all_reduce(torch.ones(4, 4, device="cuda:0").t())
    with pytest.raises(ValueError, match="peer must be another rank"):
        comm.send(torch.ones(2, device="cuda:0"), 0)
    with pytest.raises(ValueError, match=r"output must hold group size \(1\) x input elements"):
        comm.all_gather(torch.empty(3, device="cuda:0"), torch.empty(2, device="cuda:0"))
    with pytest.raises(TypeError, match="stream must be"):
        comm.all_reduce(torch.ones(2, device="cuda:0"), stream="fast")
    with pytest.raises(ValueError, match="device 99 does not exist"):
        NcclCommunicator(0, 1, UniqueId.generate(), device=99)


def test_unwaited_work_is_freed_after_completion():
    """A Work dropped before completion leaves its event and buffers with the
    communicator until the device is done; the next operation (or close) frees them."""
    import gc

    c = NcclCommunicator(0, 1, UniqueId.generate(), device=0, timeout=60)
    try:
        t = torch.ones(1 << 20, device="cuda:0")
        w = c.all_reduce(t, async_op=True)
        del w
        gc.collect()
        assert len(c._orphans) == 1 and c._orphans[0][1]        # buffers still held
        torch.cuda.synchronize()
        c.all_reduce(torch.ones(4, device="cuda:0"))             # sweeps what completed
        assert c._orphans == []
        w2 = c.all_reduce(t, async_op=True)
        del w2
        gc.collect()
        assert len(c._orphans) == 1
    finally:
        c.close()                                                # waits and frees the rest
    assert c._orphans == []


def test_close_and_abort():
    c = NcclCommunicator(0, 1, UniqueId.generate(), device=0, timeout=60)
    c.close()
    c.close()
    with pytest.raises(ResourceClosedError):
        c.all_reduce(torch.ones(1, device="cuda:0"))
    d = NcclCommunicator(0, 1, UniqueId.generate(), device=0, timeout=60)
    d.abort()
    d.abort()
    with pytest.raises(GroupAbortedError):
        d.barrier()


def test_missing_peer_init_is_bounded():
    from monarch_cy import _nccl_shim

    if not _nccl_shim.has("CommInitRankConfig"):
        pytest.skip("library lacks ncclCommInitRankConfig (< 2.14): blocking init cannot be bounded")
    t0 = time.monotonic()
    with pytest.raises(CollectiveTimeout):
        NcclCommunicator(0, 2, UniqueId.generate(), device=0, timeout=3)
    assert time.monotonic() - t0 < 30
