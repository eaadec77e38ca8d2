"""RDMABuffer with GPU memory, between real processes of one host (skips without a GPU).

GPU<->GPU through the runtime's IPC handle (``ipc``), GPU owner <-> CPU reader (IPC,
D2H/H2D), CPU owner <-> GPU reader (cross-memory attach through pinned staging),
the TCP fallback with GPU memory on both sides (pinned staging both ends), and
the same process.  Every read is checked byte for byte.
"""

from __future__ import annotations


import numpy as np
import pytest

pytestmark = pytest.mark.gpu


from _rdma_actors import Holder, Reader, pattern  # noqa: E402

torch = pytest.importorskip("torch")
MiB = 1 << 20


@pytest.fixture(scope="module")
def pair():
    from monarch_cy.actor import this_host
    procs = this_host().spawn_procs(per_host={"procs": 2})   # both see every GPU
    holder = procs.slice(procs=0).spawn("gholder", Holder)
    reader = procs.slice(procs=1).spawn("greader", Reader)
    yield holder, reader
    procs.stop().get(timeout=20)


@pytest.mark.parametrize("on", ["cuda", "cpu"])
def test_gpu_owner_read_by_another_process(pair, on):
    holder, reader = pair
    n = 8 * MiB + 5
    buf = holder.make.call_one(f"g-{on}", n, 21, "cuda").get(timeout=60)
    assert buf.device == "cuda:0"
    assert reader.backend.call_one(buf, None, on).get(timeout=30) == "ipc"
    got = reader.read.call_one(buf, on=on).get(timeout=60)
    assert got == pattern(n, 21).tobytes()
    got = reader.read.call_one(buf, offset=4097, on=on).get(timeout=60)
    assert got == pattern(n, 21).tobytes()[4097:]
    buf.drop().get(timeout=20)


@pytest.mark.parametrize("on", ["cuda", "cpu"])
def test_gpu_owner_written_by_another_process(pair, on):
    holder, reader = pair
    n = 4 * MiB
    buf = holder.make.call_one(f"gw-{on}", n, 2, "cuda").get(timeout=60)
    data = pattern(MiB + 3, 77).tobytes()
    reader.write.call_one(buf, data, 999, on=on).get(timeout=60)
    want = bytearray(pattern(n, 2).tobytes())
    want[999:999 + len(data)] = data
    assert holder.digest.call_one(f"gw-{on}").get(timeout=60) == bytes(want)
    buf.drop().get(timeout=20)


def test_cpu_owner_gpu_reader_both_directions(pair):
    holder, reader = pair
    n = 20 * MiB + 1                          # more than one staging chunk
    buf = holder.make.call_one("cg", n, 5).get(timeout=60)
    assert reader.backend.call_one(buf, None, "cuda").get(timeout=30) == "cma"
    assert reader.read.call_one(buf, on="cuda").get(timeout=60) == pattern(n, 5).tobytes()
    data = pattern(9 * MiB, 6).tobytes()
    reader.write.call_one(buf, data, 10, on="cuda").get(timeout=60)
    want = bytearray(pattern(n, 5).tobytes())
    want[10:10 + len(data)] = data
    assert holder.digest.call_one("cg").get(timeout=60) == bytes(want)
    buf.drop().get(timeout=20)


def test_tcp_fallback_with_gpu_memory_both_sides(pair):
    holder, reader = pair
    n = 17 * MiB + 3
    buf = holder.make.call_one("gt", n, 8, "cuda").get(timeout=60)
    got = reader.read.call_one(buf, backend="tcp", on="cuda").get(timeout=120)
    assert got == pattern(n, 8).tobytes()
    data = pattern(3 * MiB, 1).tobytes()
    reader.write.call_one(buf, data, 5, backend="tcp", on="cuda").get(timeout=120)
    want = bytearray(pattern(n, 8).tobytes())
    want[5:5 + len(data)] = data
    assert holder.digest.call_one("gt").get(timeout=60) == bytes(want)
    buf.drop().get(timeout=20)


def test_controller_reads_gpu_buffer_and_dropped_buffer_fails(pair):
    holder, reader = pair
    from monarch_cy.rdma import BufferDroppedError
    n = MiB
    buf = holder.make.call_one("gd", n, 4, "cuda").get(timeout=60)
    dst = torch.zeros(n, dtype=torch.uint8, device="cuda")
    assert buf.read_into(dst).get(timeout=60) is None
    assert dst.cpu().numpy().tobytes() == pattern(n, 4).tobytes()
    holder.drop_all.call_one([buf]).get(timeout=30)       # dropped by its owner
    err = reader.read_error.call_one(buf).get(timeout=60)
    assert err[0] == "BufferDroppedError", err
    with pytest.raises(BufferDroppedError):
        buf.read_into(dst).get(timeout=30)


def test_same_process_gpu_and_cpu():
    from monarch_cy.rdma import RDMAAction, RDMABuffer
    src = torch.arange(1 << 16, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    b = RDMABuffer(src)
    assert b.size() == 4 << 16 and b.backend_for("gpu") == "local"
    host = np.zeros(b.size(), np.uint8)
    dev = torch.zeros(1 << 16, dtype=torch.int32, device="cuda")
    RDMAAction().read_into(b, host).read_into(b, dev).submit().get(timeout=30)
    assert (host.view(np.int32) == np.arange(1 << 16)).all()
    assert torch.equal(dev, src)
    b.write_from(torch.full((4,), 7, dtype=torch.int32, device="cuda"), 8).get(timeout=30)
    assert src[2:6].tolist() == [7, 7, 7, 7]
    b.drop().get(timeout=10)


def test_closed_device_buffer_and_non_contiguous_gpu_tensor_refused():
    from monarch_cy.errors import ResourceClosedError
    from monarch_cy.gpu import DeviceBuffer
    from monarch_cy.rdma import RDMABuffer
    d = DeviceBuffer(4096)
    d.close()
    with pytest.raises(ResourceClosedError, match="data is a closed DeviceBuffer"):
        RDMABuffer(d)
    t = torch.zeros(64, 64, device="cuda").t()
    with pytest.raises(ValueError, match="data must be a contiguous tensor"):
        RDMABuffer(t)
