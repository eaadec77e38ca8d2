"""RDMABuffer in one process: construction, pickling, bad input, drops, errors, names."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle

import numpy as np
import pytest

import monarch_cy.rdma as rdma
from monarch_cy.rdma import (BackendUnavailableError, BufferDroppedError, ForeignJobError,
                             OwnerDiedError, RDMAAction, RDMABuffer, RDMATimeoutError)


RDMA_ERRORS = ("RDMAError", "BufferDroppedError", "OwnerDiedError", "ForeignJobError",
               "RDMATimeoutError", "BackendUnavailableError", "RDMATcpFallbackWarning",
               "RDMAReadTransferWarning", "RDMAWriteTransferWarning")


def test_public_names_complete():
    from monarch_cy import errors
    assert set(rdma.__all__) == {n for n in dir(rdma) if not n.startswith("_")} - {"annotations"}
    for name in RDMA_ERRORS:     # one class each, whose public home is monarch_cy.errors
        assert name in rdma.__all__
        assert getattr(rdma, name) is getattr(errors, name), name
        assert getattr(rdma, name).__module__ == "monarch_cy.errors", name


def test_import_is_light():
    import subprocess
    import sys
    code = ("import sys, monarch_cy.rdma; "
            "print('torch' in sys.modules, 'zmq' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]


def test_size_owner_and_small_pickle():
    a = np.arange(1000, dtype=np.uint8)
    b = RDMABuffer(a)
    assert b.size() == 1000
    from monarch_cy._actor.base.state import get_node
    assert b.owner == get_node().key
    blob = pickle.dumps(b)
    assert len(blob) < 700, len(blob)
    c = pickle.loads(blob)
    assert c.size() == 1000 and c.owner == b.owner
    b.drop().get(timeout=5)


@pytest.mark.parametrize("make", [
    lambda: np.arange(4096, dtype=np.uint8),
    lambda: bytearray(b"x" * 4096),
    lambda: memoryview(np.arange(1024, dtype=np.float32)),
    lambda: __import__("torch").arange(1024, dtype=__import__("torch").float32),
    lambda: __import__("torch").zeros(32, 32, dtype=__import__("torch").int32),
])
def test_local_read_write_byte_semantics(make):
    data = make()
    b = RDMABuffer(data)
    n = b.size()
    src_bytes = bytes(memoryview(data).cast("B")) if not hasattr(data, "numpy") else \
        data.numpy().tobytes()
    assert n == len(src_bytes)
    assert b.backend_for() == "local"
    dst = np.zeros(n, np.uint8)
    assert b.read_into(dst).get(timeout=5) is None
    assert dst.tobytes() == src_bytes
    part = np.zeros(n - 100, np.uint8)
    assert b.read_into(part, 100).get(timeout=5) is None
    assert part.tobytes() == src_bytes[100:]
    b.write_from(np.full(10, 7, np.uint8), n - 10).get(timeout=5)
    b.read_into(dst).get(timeout=5)
    assert dst[-10:].tolist() == [7] * 10
    b.drop().get(timeout=5)


def test_non_contiguous_refused_with_parameter_named():
    import torch
    t = torch.arange(100, dtype=torch.float32).view(10, 10).t()
    with pytest.raises(ValueError, match=r"data must be a contiguous tensor.*strides \(1, 10\)"):
        RDMABuffer(t)
    mv = memoryview(np.arange(100, dtype=np.uint8))[::2]
    with pytest.raises(ValueError, match=r"data must be C-contiguous memory.*strides \(2,\)"):
        RDMABuffer(mv)
    b = RDMABuffer(np.zeros(50, np.uint8))
    with pytest.raises(ValueError, match="dst must be a contiguous tensor"):
        b.read_into(torch.zeros(10, 10, dtype=torch.uint8).t())
    with pytest.raises(ValueError, match="src must be C-contiguous"):
        b.write_from(memoryview(np.zeros(100, np.uint8))[::2])
    b.drop()


def test_bad_types_and_sizes():
    with pytest.raises(TypeError, match="data must be a torch tensor.*got int 5"):
        RDMABuffer(5)
    with pytest.raises(TypeError, match="got object"):
        RDMABuffer(object())
    with pytest.raises(ValueError, match="data has 0 bytes"):
        RDMABuffer(np.zeros(0, np.uint8))
    b = RDMABuffer(np.zeros(100, np.uint8))
    with pytest.raises(ValueError, match="dst holds 99 bytes but reading this 100-byte buffer "
                                         "from offset 0 needs 100"):
        b.read_into(np.zeros(99, np.uint8))
    with pytest.raises(ValueError, match="src holds 101 bytes, which do not fit at offset 0"):
        b.write_from(np.zeros(101, np.uint8))
    with pytest.raises(ValueError, match="src holds 10 bytes, which do not fit at offset 95"):
        b.write_from(np.zeros(10, np.uint8), 95)
    with pytest.raises(ValueError, match=r"offset must be in \[0, 100\).*got 100"):
        b.read_into(np.zeros(100, np.uint8), 100)
    with pytest.raises(ValueError, match=r"offset must be in \[0, 100\).*got -1"):
        b.read_into(np.zeros(100, np.uint8), -1)
    with pytest.raises(TypeError, match="offset must be an int, got float 1.5"):
        b.read_into(np.zeros(100, np.uint8), 1.5)
    with pytest.raises(ValueError, match="dst is read-only memory"):
        b.read_into(bytes(100))
    with pytest.raises(ValueError, match="timeout must be a positive number.*got 0"):
        b.read_into(np.zeros(100, np.uint8), timeout=0)
    ro = RDMABuffer(bytes(10))
    with pytest.raises(ValueError, match="registered over read-only memory"):
        ro.write_from(np.zeros(10, np.uint8))
    b.drop()
    ro.drop()


def test_registering_freed_gpu_layer_memory_is_refused():
    from monarch_cy import gpu
    from monarch_cy.errors import ResourceClosedError
    mem = gpu.HostMemory(bytearray(64))
    mem.close()
    with pytest.raises(ResourceClosedError, match="data is a closed HostMemory: its memory "
                                                  "was freed"):
        RDMABuffer(mem)
    b = RDMABuffer(np.zeros(64, np.uint8))
    with pytest.raises(ResourceClosedError, match="dst is a closed HostMemory"):
        b.read_into(mem)
    b.drop()


def test_dropped_buffer_every_copy():
    b = RDMABuffer(np.ones(100, np.uint8))
    copy = pickle.loads(pickle.dumps(b))
    assert b.drop().get(timeout=5) is None
    assert b.drop().get(timeout=5) is None          # idempotent
    with pytest.raises(BufferDroppedError, match="was dropped"):
        b.read_into(np.zeros(100, np.uint8))
    fut = copy.read_into(np.zeros(100, np.uint8))   # this copy does not know yet
    with pytest.raises(BufferDroppedError, match="was dropped"):
        fut.get(timeout=5)
    with pytest.raises(BufferDroppedError):
        copy.write_from(np.zeros(10, np.uint8)).get(timeout=5)


def test_drop_releases_the_memory_reference():
    import gc
    import weakref
    a = np.zeros(100, np.uint8)
    ref = weakref.ref(a)
    b = RDMABuffer(a)
    del a
    gc.collect()
    assert ref() is not None        # the registration holds it
    b.drop().get(timeout=5)
    gc.collect()
    assert ref() is None


def test_handle_from_another_job_refused():
    b = RDMABuffer(np.zeros(16, np.uint8))
    foreign = RDMABuffer._from_handle(dataclasses.replace(b._h, job=b"\x01" * 16))
    foreign = pickle.loads(pickle.dumps(foreign))
    with pytest.raises(ForeignJobError, match="belongs to another job.*0101"):
        foreign.read_into(np.zeros(16, np.uint8))
    with pytest.raises(ForeignJobError):
        foreign.write_from(np.zeros(16, np.uint8))
    with pytest.raises(ForeignJobError):
        foreign.drop()
    assert isinstance(ForeignJobError("x"), ValueError)
    b.drop()


def test_backend_override_and_refusals(monkeypatch):
    b = RDMABuffer(np.zeros(16, np.uint8))
    assert rdma.get_rdma_backend(b) == "local"
    with pytest.raises(BackendUnavailableError, match="'ipc' cannot serve.*CPU memory"):
        b.read_into(np.zeros(16, np.uint8), backend="ipc")
    with pytest.raises(BackendUnavailableError, match="'ibverbs' cannot serve"):
        b.read_into(np.zeros(16, np.uint8), backend="ibverbs")
    with pytest.raises(ValueError, match="backend must be one of auto, local, cma, ipc, "
                                         "ibverbs, tcp; got 'rdma'"):
        b.read_into(np.zeros(16, np.uint8), backend="rdma")
    monkeypatch.setenv("MONARCH_CY_RDMA_BACKEND", "carrier-pigeon")
    with pytest.raises(ValueError, match="MONARCH_CY_RDMA_BACKEND='carrier-pigeon'"):
        b.read_into(np.zeros(16, np.uint8))
    monkeypatch.setenv("MONARCH_CY_RDMA_BACKEND", "tcp")
    assert rdma.get_rdma_backend() == "tcp"
    assert rdma.get_rdma_backend(b) == "tcp"
    b.drop()


def test_default_backend_without_verbs():
    assert rdma.is_rdma_available() is True
    if not rdma.is_ibverbs_available():
        assert rdma.get_rdma_backend() == "tcp"
    else:
        assert rdma.get_rdma_backend() == "ibverbs"


def test_future_awaitable_in_asyncio():
    b = RDMABuffer(np.arange(64, dtype=np.uint8))
    dst = np.zeros(64, np.uint8)

    async def main():
        return await b.read_into(dst)
    assert asyncio.run(main()) is None
    assert (dst == np.arange(64)).all()

    async def blocked():
        return b.read_into(dst).get()
    with pytest.warns(UserWarning, match="within an active event loop"):
        assert asyncio.run(blocked()) is None    # blocks the loop, as Monarch's does
    b.drop()


def test_action_overlap_rules():
    a, c = RDMABuffer(np.zeros(100, np.uint8)), RDMABuffer(np.ones(100, np.uint8))
    local = np.zeros(300, np.uint8)
    act = RDMAAction().read_into(a, local[:100]).read_into(c, local[100:200])
    with pytest.raises(ValueError, match="overlaps"):
        act.read_into(c, local[150:250])
    with pytest.raises(ValueError, match="overlaps"):
        act.write_from(a, local[50:150])
    src = np.full(100, 9, np.uint8)
    act.write_from(a, src).write_from(c, src)        # two writes may share a source
    with pytest.raises(TypeError, match="src must be an RDMABuffer"):
        act.read_into(np.zeros(3), local)
    assert len(act) == 4
    assert act.submit().get(timeout=5) is None
    assert local[:100].sum() == 0 and local[100:200].sum() == 100
    out = np.zeros(100, np.uint8)
    a.read_into(out).get(timeout=5)
    assert (out == 9).all()
    a.drop()
    c.drop()


def test_errors_pickle():
    for e in (BufferDroppedError("x"), ForeignJobError("y"), RDMATimeoutError("z"),
              BackendUnavailableError("w"), OwnerDiedError(cause="gone")):
        e2 = pickle.loads(pickle.dumps(e))
        assert type(e2) is type(e) and str(e2) == str(e)
    from monarch_cy.actor import SupervisionError
    assert isinstance(OwnerDiedError(cause="c"), SupervisionError)
    assert isinstance(RDMATimeoutError("t"), TimeoutError)
    assert isinstance(BufferDroppedError("d"), ValueError)
