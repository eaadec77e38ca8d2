"""The shim and the owning tier on a real GPU: properties, copies, streams, events."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

from monarch_cy import _hip_shim as rt
from monarch_cy import _runtime
from monarch_cy.errors import GpuRuntimeError, OutOfMemoryError, ResourceClosedError
from monarch_cy.gpu import (
    Device, DeviceBuffer, Event, HostMemory, HostRegistration, PinnedBuffer, Stream, copy,
)


def _random_bytes(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_properties_match_torch():
    torch = pytest.importorskip("torch")
    d = Device(0)
    p = d.properties
    tp = torch.cuda.get_device_properties(0)
    assert p.name == tp.name
    assert p.multiprocessor_count == tp.multi_processor_count
    assert p.total_memory == tp.total_memory
    if p.platform == "cuda":
        assert p.compute_capability == (tp.major, tp.minor)
        assert p.arch == f"sm_{tp.major}{tp.minor}"
    assert len(p.pci_bus_id.split(":")) == 3
    free, total = d.mem_info()
    assert 0 < free <= total
    assert total == p.total_memory


def test_roundtrip_every_copy_kind():
    n = 3 * 2**20 + 7
    src = _random_bytes(n, 1)
    with DeviceBuffer(n) as a, DeviceBuffer(n) as b, PinnedBuffer(n) as pin:
        copy(a, src)                       # pageable H2D
        copy(b, a)                         # D2D
        copy(pin, b)                       # D2H into pinned
        assert np.array_equal(pin.numpy(), src)
        out = np.empty(n, np.uint8)
        copy(out, a, src_offset=5, nbytes=n - 5)
        assert np.array_equal(out[: n - 5], src[5:])
        b.fill(0xAB)
        copy(out, b)
        assert (out == 0xAB).all()


def test_async_copies_on_streams_and_events():
    n = 64 * 2**20
    src = _random_bytes(n, 2)
    with Stream() as s, DeviceBuffer(n) as a, DeviceBuffer(n) as b, PinnedBuffer(n) as pin:
        pin.numpy()[:] = src
        start = Event(timing=True).record(s)
        for _ in range(4):
            copy(a, pin, stream=s)
            copy(b, a, stream=s)
        end = Event(timing=True).record(s)
        end.synchronize()
        assert s.query() and end.query()
        assert start.elapsed_ms(end) > 0
        pin.numpy()[:] = 0
        copy(pin, b, stream=s)
        s.synchronize()
        assert np.array_equal(pin.numpy(), src)
        # Cross-stream ordering through an event.
        with Stream() as s2:
            b.fill(7, stream=s)
            ev = s.record_event()
            s2.wait_event(ev)
            copy(pin, b, stream=s2)
            s2.synchronize()
            assert (pin.numpy() == 7).all()
            ev.close()
        start.close(); end.close()


def test_pointer_attributes_normalised():
    with DeviceBuffer(4096) as d, PinnedBuffer(4096) as p:
        kind, dev, dptr, _ = rt.pointerGetAttributes(d.ptr)
        assert (kind, dev, dptr) == ("device", 0, d.ptr)
        assert rt.pointerGetAttributes(p.ptr)[0] == "host"
    arr = np.zeros(4096, np.uint8)
    assert rt.pointerGetAttributes(arr.ctypes.data)[0] == "unregistered"


def test_host_registration_pins_in_place():
    arr = _random_bytes(2**20, 3)
    with HostRegistration(arr) as reg, DeviceBuffer(arr.nbytes) as d:
        assert rt.pointerGetAttributes(arr.ctypes.data)[0] == "host"
        copy(d, reg.memory)
        back = np.zeros_like(arr)
        copy(back, d)
        assert np.array_equal(back, arr)
    assert rt.pointerGetAttributes(arr.ctypes.data)[0] == "unregistered"


def test_out_of_memory_is_memoryerror_and_clears_sticky_state():
    with pytest.raises(OutOfMemoryError) as ei:
        DeviceBuffer(1 << 52)
    assert isinstance(ei.value, MemoryError) and ei.value.call == "Malloc"
    assert rt.peekAtLastError() == 0
    with DeviceBuffer(16) as d:   # the runtime still works
        d.fill(1)


def test_lifetimes_close_and_scope():
    d = Device(0)
    with d:
        buf = d.buffer(1024)
        s = d.stream()
        ev = d.event()
    assert buf.closed and s.closed and ev.closed and d.closed
    with pytest.raises(ResourceClosedError):
        buf.ptr
    with pytest.raises(ResourceClosedError):
        s.synchronize()
    buf.close(); s.close(); ev.close()   # idempotent
    p = PinnedBuffer(64)
    view = p.view()
    with pytest.raises(BufferError, match="export"):
        p.close()
    assert not p.closed
    view.release()
    p.close()
    assert p.closed


def test_forked_child_never_frees_parent_memory():
    buf = DeviceBuffer(1 << 20)
    buf.fill(3)
    pid = os.fork()
    if pid == 0:
        del buf
        import gc

        gc.collect()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    out = np.zeros(1 << 20, np.uint8)
    copy(out, buf)
    assert (out == 3).all()
    buf.close()


def test_bad_input_is_clear():
    with DeviceBuffer(100) as d:
        with pytest.raises(ValueError, match="dst holds 100 bytes"):
            copy(d, np.zeros(101, np.uint8))
        with pytest.raises(ValueError, match="src_offset"):
            copy(np.zeros(10, np.uint8), d, src_offset=-1)
        with pytest.raises(ValueError, match="value must be a byte"):
            d.fill(256)
    with pytest.raises(ValueError, match="nbytes must be >= 0"):
        DeviceBuffer(-1)
    with pytest.raises(TypeError, match="nbytes must be an int"):
        DeviceBuffer(1.5)
    with pytest.raises(ValueError, match="device 4096 does not exist"):
        DeviceBuffer(1, device=4096)
    with pytest.raises(ValueError, match="size must be >= 0"):
        rt.malloc(-5)
    with pytest.raises(GpuRuntimeError):
        rt.free(0xDEAD0000)
    s = Stream()
    s.close()
    with pytest.raises(ResourceClosedError):
        copy(np.zeros(1, np.uint8), np.zeros(1, np.uint8), stream=s)


def test_binding_reports_where_from():
    b = _runtime.current()
    assert b is not None and b.platform in ("cuda", "rocm")
    assert os.path.exists(b.path)
    assert rt.runtimeGetVersion() == b.version
    assert rt.driverGetVersion() > 0
