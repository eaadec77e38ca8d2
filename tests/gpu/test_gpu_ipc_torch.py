"""IPC between two real processes, and torch interop, on a real GPU."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

from monarch_cy.errors import GpuRuntimeError
from monarch_cy.gpu import DeviceBuffer, IpcHandle, Stream, copy, wrap_torch

_CHILD = textwrap.dedent(
    """
    import pickle, sys, json, hashlib
    import numpy as np
    from monarch_cy.gpu import copy
    handle = pickle.loads(sys.stdin.buffer.read())
    with handle.open() as m:
        host = np.empty(m.nbytes, np.uint8)
        copy(host, m)
        digest = hashlib.sha256(host.tobytes()).hexdigest()
        host[:] = 0x5A
        copy(m, host)              # write back through the mapping
    print(json.dumps({"sha": digest, "nbytes": int(handle.nbytes)}))
    """
)


def test_ipc_between_processes_reads_and_writes():
    import hashlib

    n = 32 * 2**20 + 3
    data = np.random.default_rng(7).integers(0, 256, n, dtype=np.uint8)
    with DeviceBuffer(n) as buf:
        copy(buf, data)
        handle = buf.ipc_handle()
        assert isinstance(handle, IpcHandle) and len(handle.handle) == 64
        r = subprocess.run(
            [sys.executable, "-c", _CHILD], input=pickle.dumps(handle),
            capture_output=True, timeout=120,
        )
        assert r.returncode == 0, r.stderr.decode()
        out = json.loads(r.stdout)
        assert out == {"sha": hashlib.sha256(data.tobytes()).hexdigest(), "nbytes": n}
        back = np.empty(n, np.uint8)
        copy(back, buf)
        assert (back == 0x5A).all()


def test_ipc_open_in_exporting_process_is_refused():
    with DeviceBuffer(4096) as buf:
        with pytest.raises(GpuRuntimeError):
            buf.ipc_handle().open()


def test_torch_tensors_both_ways_without_copies():
    torch = pytest.importorskip("torch")
    t = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    src = wrap_torch(t)
    assert src.ptr == t.data_ptr() and src.nbytes == t.numel() * 4
    with DeviceBuffer(src.nbytes) as buf:
        copy(buf, src)
        view = buf.to_torch(torch.float32)
        assert view.data_ptr() == buf.ptr
        assert torch.equal(view, t)
        view.mul_(2)                      # torch writes into our memory
        torch.cuda.synchronize()
        host = np.empty(1 << 20, np.float32)
        copy(host, buf)
        assert np.array_equal(host, (np.arange(1 << 20, dtype=np.float32) * 2))
        del view
    cpu = torch.ones(1000, dtype=torch.float64)
    with wrap_torch(cpu) as m:
        assert m.ptr == cpu.data_ptr() and m.nbytes == 8000
    with pytest.raises(ValueError, match="contiguous"):
        wrap_torch(torch.ones(4, 4, device="cuda").t())


def test_torch_streams_both_ways():
    torch = pytest.importorskip("torch")
    ts = torch.cuda.Stream()
    s = Stream.from_torch(ts)
    assert s.borrowed and s.handle == ts.cuda_stream
    a = torch.randn(1 << 18, device="cuda")
    b = torch.empty_like(a)
    torch.cuda.synchronize()
    copy(wrap_torch(b), wrap_torch(a), stream=s)
    s.synchronize()
    assert torch.equal(a, b)
    s.close()   # borrowed: does not destroy torch's stream
    ts.synchronize()
    with Stream() as mine:
        ext = mine.to_torch()
        assert ext.cuda_stream == mine.handle
        with torch.cuda.stream(ext):
            c = a * 3
        mine.synchronize()
        assert torch.equal(c, a * 3)


def test_torch_loaded_first_is_reused_not_loaded_twice():
    code = textwrap.dedent(
        """
        import json, torch
        torch.zeros(1, device="cuda")
        from monarch_cy import _runtime
        b = _runtime.ensure_bound()
        maps = open("/proc/self/maps").read().splitlines()
        libs = sorted({l.split()[-1] for l in maps if "libcudart" in l or "libamdhip64" in l})
        print(json.dumps({"source": b.source, "path": b.path, "libs": libs}))
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["source"] == "already loaded"
    assert out["libs"] == [out["path"]]


def test_ipc_of_torch_tensor_inside_a_caching_allocator_block():
    """A tensor slice sits at an offset in torch's block: the handle carries it."""
    import hashlib

    torch = pytest.importorskip("torch")
    big = torch.randint(0, 256, (8 << 20,), dtype=torch.uint8, device="cuda")
    part = big[3 << 20: (3 << 20) + 1_000_003]
    mem = wrap_torch(part)
    base, size = __import__("monarch_cy._hip_shim", fromlist=["x"]).memGetAddressRange(mem.ptr)
    assert base <= mem.ptr and mem.ptr + mem.nbytes <= base + size
    handle = mem.ipc_handle()
    assert handle.offset == mem.ptr - base > 0
    torch.cuda.synchronize()
    expect = hashlib.sha256(part.cpu().numpy().tobytes()).hexdigest()
    before_edge = int(big[(3 << 20) - 1])
    r = subprocess.run(
        [sys.executable, "-c", _CHILD], input=pickle.dumps(handle), capture_output=True, timeout=120
    )
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["sha"] == expect
    assert bool((part == 0x5A).all())            # the child's write landed in the slice
    assert int(big[(3 << 20) - 1]) == before_edge  # and nowhere before it


def test_dmabuf_export_of_device_memory():
    import os

    from monarch_cy import _hip_shim as rt

    with DeviceBuffer(2 << 20) as buf:
        try:
            fd = rt.memGetDmaBufFd(buf.ptr, buf.nbytes)
        except GpuRuntimeError as e:
            pytest.skip(f"this driver/kernel does not export dma-bufs: {e}")
        try:
            assert fd >= 0
            os.fstat(fd)
        finally:
            os.close(fd)
