"""The flat GPU shim (``monarch_cy._hip_shim``) driven against the fake CUDA runtime.

CPU-only: the fake (tests/fake_runtime/fake_cudart.c) keeps device memory in
host memory, so these tests prove the shim's binding, argument checking, error
mapping, sticky-error clearing, GIL release and lifetime bookkeeping, not GPU
behaviour (that is what the ``gpu``-marked tests on the H200 are for).

Each scenario runs in a fresh interpreter (``fake_cudart.run``): a dlopen'd
runtime cannot be unloaded and the fake's counters are per process.
"""

from __future__ import annotations

import glob
import os
import pickle
import re
from pathlib import Path

import pytest

from monarch_cy._errors import (
    GpuRuntimeError,
    GpuRuntimeUnavailable,
    NoDeviceError,
    OutOfMemoryError,
)

# Functions of the shim that are not runtime calls.
NOT_CALLS = {"bind", "unbind", "is_bound", "bound_platform", "function_names", "bind_driver",
             "driver_function_names"}

# Plausible arguments for every runtime call of the shim (bogus addresses: used
# only where the call fails before touching memory).  Embedded in snippets.
CALL_ARGS = """
CALL_ARGS = {
    "getDeviceCount": (), "getDevice": (), "setDevice": (0,), "deviceSynchronize": (),
    "getDeviceProperties": (0,), "deviceGetAttribute": (16, 0), "deviceGetPCIBusId": (0,),
    "deviceCanAccessPeer": (0, 1), "deviceEnablePeerAccess": (1,),
    "runtimeGetVersion": (), "driverGetVersion": (), "memGetInfo": (),
    "malloc": (16,), "free": (4096,), "hostAlloc": (16,), "freeHost": (4096,),
    "hostRegister": (4096, 16), "hostUnregister": (4096,),
    "memcpy": (4096, 8192, 16, 1), "memcpyAsync": (4096, 8192, 16, 1, 0),
    "memset": (4096, 0, 16), "memsetAsync": (4096, 0, 16, 0),
    "streamCreateWithFlags": (), "streamDestroy": (4096,), "streamSynchronize": (0,),
    "streamQuery": (0,), "streamWaitEvent": (0, 4096),
    "eventCreateWithFlags": (), "eventRecord": (4096, 0), "eventSynchronize": (4096,),
    "eventQuery": (4096,), "eventElapsedTime": (4096, 8192), "eventDestroy": (4096,),
    "ipcGetMemHandle": (4096,), "ipcOpenMemHandle": (bytes(64),), "ipcCloseMemHandle": (4096,),
    "pointerGetAttributes": (4096,),
    "getLastError": (), "peekAtLastError": (), "getErrorName": (1,), "getErrorString": (1,),
    "memGetAddressRange": (4096,), "memGetDmaBufFd": (4096, 4096), "driverInit": (),
}
# Driver-level calls (bound from libcuda): shim name -> the call name its errors carry.
DRIVER_CALLS = {"memGetAddressRange": "MemGetAddressRange",
                "memGetDmaBufFd": "MemGetHandleForAddressRange", "driverInit": "Init"}
NOT_CALLS = {"bind", "unbind", "is_bound", "bound_platform", "function_names", "bind_driver",
             "driver_function_names"}
PUBLIC = sorted(n for n in dir(shim) if not n.startswith("_") and n not in NOT_CALLS
                and callable(getattr(shim, n)) and not isinstance(getattr(shim, n), type))
"""


@pytest.fixture(scope="module")
def driver_env(fake_cudart, tmp_path_factory):
    """Env making the loader's ``libcuda.so.1`` the fake itself (a symlink on
    LD_LIBRARY_PATH: the dynamic loader then returns the copy already loaded as
    the runtime), so the shim's driver-level table is bound to the fake too."""
    d = tmp_path_factory.mktemp("libcuda")
    (d / "libcuda.so.1").symlink_to(fake_cudart.path)
    return {"LD_LIBRARY_PATH": os.pathsep.join(filter(None, [str(d), os.environ.get("LD_LIBRARY_PATH")]))}


def _fake_codes() -> list[int]:
    """Every status code in the fake's runtime name table (read from its source)."""
    src = Path(__file__).with_name("fake_runtime") / "fake_cudart.c"
    return [int(c) for c in re.findall(r'^\s*\{(\d+), "cuda', src.read_text(), re.M)]


# ------------------------------------------------------------------ the fake itself


def test_fake_exports_every_symbol_the_shim_binds(fake_cudart):
    """The fake exports each cuda* name of the shim's table, plus cudaRuntimeGetVersion."""
    out = fake_cudart.run(
        """
        l = lib()
        names = [c for c, _ in shim.function_names()] + ["cudaRuntimeGetVersion"]
        emit({"n": len(names), "missing": [n for n in names if not hasattr(l, n)]})
        """,
        bind=False,
    )
    assert out["n"] >= 41
    assert out["missing"] == []


def _cuda_include_dirs() -> list[str]:
    dirs = [os.path.join(h, "include") for h in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if h]
    dirs += ["/usr/local/cuda/include"] + sorted(glob.glob("/usr/local/cuda-1[3-9]*/include"))
    return [d for d in dirs if os.path.exists(os.path.join(d, "cuda_runtime_api.h"))]


def test_fake_prototypes_and_layouts_match_real_cuda_headers(fake_cudart, tmp_path):
    """Compiled against the real CUDA 13 headers, every fake prototype is CUDA's own
    (a conflicting definition is a compile error) and the struct offsets the fake
    writes (totalGlobalMem 288; pointer attributes 4/8/16) are CUDA's."""
    dirs = _cuda_include_dirs()
    if not dirs:
        pytest.skip("no CUDA headers (cuda_runtime_api.h) on this machine")
    try:
        fake_cudart.build(tmp_path, "-DFAKE_WITH_CUDA_HEADERS", f"-I{dirs[0]}", "-Werror", name="libchecked.so")
    except RuntimeError as e:
        pytest.fail(f"fake_cudart.c disagrees with {dirs[0]}:\n{e}")


def test_fake_error_names_match_real_libcudart(fake_cudart):
    """Every status the fake names has the name and text the real libcudart 13 gives it."""
    codes = _fake_codes()
    assert 0 in codes and 400 in codes
    out = fake_cudart.run(
        f"""
        try:
            real = ctypes.CDLL("libcudart.so.13")
        except OSError as e:
            emit({{"skip": str(e)}}); sys.exit(0)
        fake = lib()
        res = {{}}
        for who, l in (("real", real), ("fake", fake)):
            l.cudaGetErrorName.restype = l.cudaGetErrorString.restype = ctypes.c_char_p
            res[who] = [[l.cudaGetErrorName(c).decode(), l.cudaGetErrorString(c).decode()]
                        for c in {codes + [123456]}]
        emit(res)
        """,
        bind=False,
    )
    if "skip" in out:
        pytest.skip(f"no real libcudart.so.13 to compare with: {out['skip']}")
    assert out["fake"] == out["real"]


# ------------------------------------------------------------------ binding


def test_binds_the_library_named_by_env(fake_cudart):
    """MONARCH_CY_GPU_RUNTIME_LIBRARY binds exactly that file, as CUDA 13, by cuda* names."""
    out = fake_cudart.run(
        """
        before = shim.is_bound()
        b = rt.ensure_bound()
        emit({"before": before, "after": shim.is_bound(), "platform": b.platform,
              "shim_platform": shim.bound_platform(), "path": b.path, "source": b.source,
              "version": b.version, "version_text": b.version_text, "table": b.table.name,
              "symbols": sorted(set(b.symbols.values())), "tried": list(b.tried),
              "same": rt.ensure_bound() is b})
        """
    )
    assert out["before"] is False and out["after"] is True
    assert out["platform"] == out["shim_platform"] == "cuda"
    assert out["path"] == str(fake_cudart.path)
    assert out["source"] == "env"
    assert (out["version"], out["version_text"], out["table"]) == (13000, "13.0", "cuda13")
    assert all(s.startswith("cuda") for s in out["symbols"]) and len(out["symbols"]) >= 41
    assert out["tried"][-1].endswith(": bound") and str(fake_cudart.path) in out["tried"][-1]
    assert out["same"] is True


# ------------------------------------------------------------------ every call, data checked


def test_every_flat_tier_call_once_with_data_verified(fake_cudart, driver_env):
    """Each runtime call of the flat tier runs against the fake, and the data it moves
    or reports is checked: real bytes survive H2D/D2D/D2H copies (sync and async),
    memsets land, events time a real sleep, properties agree with attributes, the
    driver-level calls find the allocation and export its bytes as a dma-buf fd,
    and every object created is gone at the end."""
    out = fake_cudart.run(
        CALL_ARGS,
        """
        import mmap, time
        called = set()
        def _tracked(name, fn):
            def call(*a, **k):
                called.add(name)
                return fn(*a, **k)
            return call
        for n in PUBLIC:
            setattr(shim, n, _tracked(n, getattr(shim, n)))

        b = rt.ensure_bound(); t = b.table
        o = {}
        o["count"] = shim.getDeviceCount()
        shim.setDevice(1); o["dev_after_set"] = shim.getDevice(); shim.setDevice(0)
        shim.deviceSynchronize()
        o["props"] = shim.getDeviceProperties(1)
        o["pci_attr"] = shim.deviceGetAttribute(t.attr_pci_bus_id, 1)
        o["pci_id"] = shim.deviceGetPCIBusId(1)
        o["cc"] = [shim.deviceGetAttribute(t.attr_compute_capability_major, 0),
                   shim.deviceGetAttribute(t.attr_compute_capability_minor, 0)]
        o["sms"] = shim.deviceGetAttribute(t.attr_multiprocessor_count, 0)
        o["peer"] = [shim.deviceCanAccessPeer(0, 1), shim.deviceCanAccessPeer(0, 0)]
        shim.deviceEnablePeerAccess(1)
        shim.deviceEnablePeerAccess(1)          # already enabled: not an error
        o["peek_after_peer"] = shim.peekAtLastError()
        o["versions"] = [shim.runtimeGetVersion(), shim.driverGetVersion()]

        N = mmap.PAGESIZE
        free0, total0 = shim.memGetInfo()
        d1, d2 = shim.malloc(N), shim.malloc(N)
        free1, total1 = shim.memGetInfo()
        o["mem"] = [free0, total0, free1, total1]
        data = os.urandom(N)
        src, dst = ctypes.create_string_buffer(data, N), ctypes.create_string_buffer(N)
        shim.memcpy(d1, ctypes.addressof(src), N, shim.MEMCPY_HOST_TO_DEVICE)
        shim.memcpy(d2, d1, N, shim.MEMCPY_DEVICE_TO_DEVICE)
        shim.memcpy(ctypes.addressof(dst), d2, N, shim.MEMCPY_DEVICE_TO_HOST)
        o["round_trip"] = dst.raw == data

        s = shim.streamCreateWithFlags(shim.STREAM_NON_BLOCKING)
        h = shim.hostAlloc(N, shim.HOST_ALLOC_PORTABLE)
        shim.memsetAsync(d1, 0x5A, N // 2, s)
        shim.memcpyAsync(h, d1, N, shim.MEMCPY_DEVICE_TO_HOST, s)
        o["streamQuery"] = shim.streamQuery(s)
        shim.streamSynchronize(s)
        o["memsetAsync"] = ctypes.string_at(h, N) == b"\\x5a" * (N // 2) + data[N // 2:]
        shim.memset(d2, 0xA5, N)
        shim.memcpyAsync(h, d2, N, shim.MEMCPY_DEFAULT, 0)
        o["memset"] = ctypes.string_at(h, N) == b"\\xa5" * N

        reg = ctypes.create_string_buffer(N)
        shim.hostRegister(ctypes.addressof(reg), N, shim.HOST_REGISTER_DEFAULT)
        shim.memcpy(ctypes.addressof(reg), d1, N, shim.MEMCPY_DEVICE_TO_HOST)
        o["registered_copy"] = reg.raw == b"\\x5a" * (N // 2) + data[N // 2:]
        o["attrs"] = {
            "device": [shim.pointerGetAttributes(d1), d1],
            "interior": [shim.pointerGetAttributes(d1 + 100), d1 + 100],
            "pinned": [shim.pointerGetAttributes(h), h],
            "registered": [shim.pointerGetAttributes(ctypes.addressof(reg)), ctypes.addressof(reg)],
            "unregistered": [shim.pointerGetAttributes(ctypes.addressof(dst)), ctypes.addressof(dst)],
        }

        e0 = shim.eventCreateWithFlags(shim.EVENT_DEFAULT)
        e1 = shim.eventCreateWithFlags(shim.EVENT_BLOCKING_SYNC)
        shim.eventRecord(e0, s); time.sleep(0.05); shim.eventRecord(e1, s)
        o["eventQuery"] = shim.eventQuery(e1)
        shim.eventSynchronize(e1)
        shim.streamWaitEvent(s, e1)
        o["elapsed_ms"] = shim.eventElapsedTime(e0, e1)

        hd = shim.ipcGetMemHandle(d1)
        o["ipc"] = [type(hd).__name__, len(hd), shim.ipcGetMemHandle(d1 + 8) == hd]
        o["ipc_open_own"] = err(shim.ipcOpenMemHandle, hd)
        o["ipc_close_unmapped"] = err(shim.ipcCloseMemHandle, d1)
        shim.driverInit()
        o["range"] = [shim.memGetAddressRange(d1 + 100), d1, N]
        fd = shim.memGetDmaBufFd(d2, N)
        o["dmabuf"] = os.pread(fd, N, 0) == b"\\xa5" * N
        os.close(fd)
        o["last_errors"] = [shim.getLastError(), shim.peekAtLastError()]
        o["names"] = [shim.getErrorName(2), shim.getErrorString(2), shim.getErrorName(400)]

        o["live_mid"] = live()
        shim.hostUnregister(ctypes.addressof(reg))
        shim.freeHost(h)
        shim.free(d1); shim.free(d2)
        shim.eventDestroy(e0); shim.eventDestroy(e1)
        shim.streamDestroy(s)
        o["live_end"] = live()
        o["not_called"] = sorted(set(PUBLIC) - called)
        o["public_without_args"] = sorted(set(PUBLIC) - set(CALL_ARGS))
        emit(o)
        """,
        FAKE_CUDART_DEVICES="2",
        FAKE_CUDART_MEM_LIMIT=str(1 << 30),
        **driver_env,
    )
    assert out["public_without_args"] == [], "a new shim function: add it to CALL_ARGS"
    assert out["not_called"] == []
    assert out["count"] == 2 and out["dev_after_set"] == 1
    assert out["props"] == {"name": "Fake CUDA Device 1", "total_memory": 1 << 30, "arch_name": None}
    assert out["pci_id"] == f"0000:{out['pci_attr']:02x}:00.0"
    assert out["cc"] == [9, 0] and out["sms"] == 132
    assert out["peer"] == [True, False] and out["peek_after_peer"] == 0
    assert out["versions"] == [13000, 13000]
    free0, total0, free1, total1 = out["mem"]
    assert total0 == total1 == 1 << 30 and free0 - free1 == 2 * out["range"][2]
    assert out["round_trip"] and out["memsetAsync"] and out["memset"] and out["registered_copy"]
    assert out["streamQuery"] is True and out["eventQuery"] is True
    assert 40 <= out["elapsed_ms"] < 5000
    attrs = out["attrs"]
    assert attrs["device"][0] == ["device", 0, attrs["device"][1], 0]
    assert attrs["interior"][0] == ["device", 0, attrs["interior"][1], 0]
    for kind in ("pinned", "registered"):
        (mtype, dev, dptr, hptr), addr = attrs[kind]
        assert (mtype, dev, hptr) == ("host", 0, addr)
    assert attrs["unregistered"][0] == ["unregistered", -1, 0, 0]
    assert out["ipc"] == ["bytes", 64, True]
    (base, size), d1, n = out["range"]
    assert (base, size) == (d1, n) and out["dmabuf"] is True
    assert out["ipc_open_own"]["type"] == "GpuRuntimeError" and out["ipc_open_own"]["call"] == "IpcOpenMemHandle"
    assert out["ipc_close_unmapped"]["status"] == 1
    assert out["last_errors"] == [0, 0]
    assert out["names"] == ["cudaErrorMemoryAllocation", "out of memory", "cudaErrorInvalidResourceHandle"]
    assert out["live_mid"] == {"allocations": 2, "host_allocations": 1, "registrations": 1,
                               "ipc_mappings": 0, "streams": 1, "events": 2}
    assert set(out["live_end"].values()) == {0}


# ------------------------------------------------------------------ error mapping


def test_out_of_memory_is_a_MemoryError_and_leaves_nothing(fake_cudart):
    """Status 2 raises OutOfMemoryError (a MemoryError and a GpuRuntimeError) naming
    the call; the sticky error is cleared and a later allocation that fits works."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        big = err(shim.malloc, 2 << 20)
        peek = shim.peekAtLastError()
        p = shim.malloc(512 << 10)
        mid = live()["allocations"]
        shim.free(p)
        fail("HostAlloc", 2)
        pinned = err(shim.hostAlloc, 64)
        emit({"big": big, "peek": peek, "mid": mid, "end": live(), "pinned": pinned,
              "pinned_isinstance": isinstance(pickle.loads(bytes.fromhex(pinned["pickle"])), MemoryError)})
        """,
        FAKE_CUDART_MEM_LIMIT=str(1 << 20),
    )
    big = out["big"]
    assert big["type"] == "OutOfMemoryError"
    assert {"MemoryError", "GpuRuntimeError", "MonarchCyError"} <= set(big["mro"])
    assert (big["status"], big["name"], big["call"]) == (2, "cudaErrorMemoryAllocation", "Malloc")
    assert "out of memory" in big["text"] and "Malloc" in big["text"]
    assert out["peek"] == 0
    assert out["mid"] == 1 and out["end"]["allocations"] == 0
    assert out["pinned"]["type"] == "OutOfMemoryError" and out["pinned"]["call"] == "HostAlloc"
    assert out["pinned_isinstance"] is True


def test_no_device_raises_NoDeviceError(fake_cudart):
    """With no device the count and allocation raise NoDeviceError (status 100, its
    CUDA name, the call), while version queries still answer; 35 (no driver) too."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        count = err(shim.getDeviceCount)
        peek = shim.peekAtLastError()
        m = err(shim.malloc, 16)
        version = shim.runtimeGetVersion()
        fail("GetDeviceCount", 35)
        driver = err(shim.getDeviceCount)
        emit({"count": count, "peek": peek, "malloc": m, "version": version, "driver": driver})
        """,
        FAKE_CUDART_DEVICES="0",
    )
    c = out["count"]
    assert c["type"] == "NoDeviceError" and "GpuRuntimeError" in c["mro"]
    assert (c["status"], c["name"], c["call"]) == (100, "cudaErrorNoDevice", "GetDeviceCount")
    assert "no CUDA-capable device is detected" in c["text"]
    assert out["peek"] == 0
    assert out["malloc"]["type"] == "NoDeviceError" and out["malloc"]["call"] == "Malloc"
    assert out["version"] == 13000
    assert out["driver"]["type"] == "NoDeviceError" and out["driver"]["status"] == 35


def test_other_failures_raise_GpuRuntimeError_with_status_name_call(fake_cudart):
    """Failures other than OOM / no-device raise plain GpuRuntimeError carrying the
    status, CUDA's name and the failing call: unknown pointer, bad ordinal, unknown handle."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        p = shim.malloc(64)
        shim.free(p)
        emit({"double_free": err(shim.free, p), "bad_device": err(shim.setDevice, 3),
              "bad_props": err(shim.getDeviceProperties, -1),
              "bad_stream": err(shim.streamDestroy, 0x1234),
              "bad_direction": err(shim.memcpy, 4096, 8192, 16, 9), "peek": shim.peekAtLastError()})
        """
    )
    expect = {
        "double_free": (1, "cudaErrorInvalidValue", "Free"),
        "bad_device": (101, "cudaErrorInvalidDevice", "SetDevice"),
        "bad_props": (101, "cudaErrorInvalidDevice", "GetDeviceProperties"),
        "bad_stream": (400, "cudaErrorInvalidResourceHandle", "StreamDestroy"),
        "bad_direction": (21, "cudaErrorInvalidMemcpyDirection", "Memcpy"),
    }
    for key, (status, name, call) in expect.items():
        e = out[key]
        assert e["type"] == "GpuRuntimeError", key
        assert (e["status"], e["name"], e["call"]) == (status, name, call), key
        assert e["text"].startswith(f"{call}: {name} ({status}): "), key
    assert out["peek"] == 0


def test_each_call_reports_its_own_name_and_clears_the_sticky_error(fake_cudart, driver_env):
    """For every status-returning call: a failure forced in the runtime (999) raises
    GpuRuntimeError whose .call is that call's CUDA name (runtime or driver), with
    the vendor's name for 999, and afterwards the runtime's sticky error is clear
    (peekAtLastError() == 0)."""
    out = fake_cudart.run(
        CALL_ARGS,
        """
        rt.ensure_bound()
        no_status = {"getLastError", "peekAtLastError", "getErrorName", "getErrorString"}
        res = {}
        for name in PUBLIC:
            if name in no_status:
                continue
            cuda = DRIVER_CALLS.get(name) or name[0].upper() + name[1:]
            fail(cuda, 999)
            e = err(getattr(shim, name), *CALL_ARGS[name])
            res[name] = [cuda, e and e["type"], e and e["status"], e and e["name"], e and e["call"],
                         shim.peekAtLastError()]
        emit(res)
        """,
        **driver_env,
    )
    assert len(out) >= 40
    for name, (cuda, typ, status, ename, call, peek) in out.items():
        unknown = "CUDA_ERROR_UNKNOWN" if call in ("MemGetAddressRange", "MemGetHandleForAddressRange", "Init") \
            else "cudaErrorUnknown"
        assert (typ, status, ename, call, peek) == ("GpuRuntimeError", 999, unknown, cuda, 0), name


def test_sticky_error_semantics_and_clearing(fake_cudart):
    """The fake's last error is sticky (a control: a failure made through ctypes stays
    visible to peekAtLastError); getLastError returns and clears it; a failure made
    through the shim leaves nothing behind."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        l = lib()
        l.cudaFree(ctypes.c_void_p(0x1234))           # fails in the runtime, not via the shim
        sticky = [shim.peekAtLastError(), shim.peekAtLastError()]
        got = [shim.getLastError(), shim.getLastError()]
        l.cudaFree(ctypes.c_void_p(0x1234))
        shim_err = err(shim.free, 0x1234)
        emit({"sticky": sticky, "got": got, "after_shim": shim.peekAtLastError(), "shim_err": shim_err})
        """
    )
    assert out["sticky"] == [1, 1]
    assert out["got"] == [1, 0]
    assert out["shim_err"]["status"] == 1 and out["after_shim"] == 0


def test_query_not_ready_returns_false_and_clears(fake_cudart):
    """NotReady (600) from streamQuery / eventQuery is False, not an exception, and
    leaves no sticky error; the next query answers True."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        s = shim.streamCreateWithFlags(0); e = shim.eventCreateWithFlags(0)
        fail("StreamQuery", 600); sq = [shim.streamQuery(s), shim.peekAtLastError(), shim.streamQuery(s)]
        fail("EventQuery", 600); eq = [shim.eventQuery(e), shim.peekAtLastError(), shim.eventQuery(e)]
        shim.eventDestroy(e); shim.streamDestroy(s)
        emit({"sq": sq, "eq": eq})
        """
    )
    assert out["sq"] == [False, 0, True]
    assert out["eq"] == [False, 0, True]


def test_errors_pickle_round_trip_with_attributes(fake_cudart):
    """Errors raised in one process unpickle in another with type, status, name,
    message, call and text intact (OOM, no-device, generic, unavailable)."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        fail("Malloc", 2); oom = err(shim.malloc, 8)
        fail("GetDevice", 100); nodev = err(shim.getDevice)
        generic = err(shim.streamSynchronize, 0x99)
        rt.reset()
        unbound = err(shim.getDevice)
        os.environ["MONARCH_CY_GPU_RUNTIME_LIBRARY"] = "/nonexistent/libcudart.so.13"
        unavailable = err(rt.ensure_bound)
        emit({k: v for k, v in locals().items() if k in ("oom", "nodev", "generic", "unbound", "unavailable")})
        """
    )
    expect = {"oom": OutOfMemoryError, "nodev": NoDeviceError, "generic": GpuRuntimeError,
              "unbound": GpuRuntimeUnavailable, "unavailable": GpuRuntimeUnavailable}
    for key, cls in expect.items():
        e = pickle.loads(bytes.fromhex(out[key]["pickle"]))
        assert type(e) is cls, key
        assert str(e) == out[key]["text"], key
        assert str(e) == str(pickle.loads(pickle.dumps(e))), key
        if issubclass(cls, GpuRuntimeError):
            assert (e.status, e.name, e.call) == (out[key]["status"], out[key]["name"], out[key]["call"])
            assert e.message and e.message in str(e)
    assert isinstance(pickle.loads(bytes.fromhex(out["oom"]["pickle"])), MemoryError)
    unavailable = pickle.loads(bytes.fromhex(out["unavailable"]["pickle"]))
    assert any("/nonexistent/libcudart.so.13" in t for t in unavailable.tried)


# ------------------------------------------------------------------ bad input


def test_bad_sizes_and_pointers_raise_naming_the_parameter(fake_cudart):
    """Negative or overflowing sizes raise ValueError naming the size parameter;
    negative or overflowing addresses raise ValueError naming the address parameter;
    non-int addresses and sizes (bool included) raise TypeError naming it.  Nothing
    reaches the runtime."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        p = shim.malloc(64)
        cases = {
            "malloc(-1)": (shim.malloc, (-1,), "size"),
            "malloc(2**64)": (shim.malloc, (2**64,), "size"),
            "hostAlloc(-5)": (shim.hostAlloc, (-5,), "size"),
            "hostRegister(p, -1)": (shim.hostRegister, (p, -1), "size"),
            "memcpy size -1": (shim.memcpy, (p, p, -1, 3), "size"),
            "memset size -1": (shim.memset, (p, 0, -1), "size"),
            "memsetAsync size -1": (shim.memsetAsync, (p, 0, -1, 0), "size"),
            "free(-1)": (shim.free, (-1,), "ptr"),
            "memcpy dst -1": (shim.memcpy, (-1, p, 8, 3), "dst"),
            "memcpy src -1": (shim.memcpy, (p, -1, 8, 3), "src"),
            "memcpyAsync stream -1": (shim.memcpyAsync, (p, p, 8, 3, -1), "stream"),
            "eventRecord(-1, 0)": (shim.eventRecord, (-1, 0), "event"),
            "eventElapsedTime(-1, 0)": (shim.eventElapsedTime, (-1, 0), "start"),
            "free('abc')": (shim.free, ("abc",), "ptr"),
            "free(1.5)": (shim.free, (1.5,), "ptr"),
            "memcpy dst str": (shim.memcpy, ("x", p, 8, 3), "dst"),
            "streamSynchronize([])": (shim.streamSynchronize, ([],), "stream"),
            "pointerGetAttributes(b'')": (shim.pointerGetAttributes, (b"",), "ptr"),
            "free(2**64)": (shim.free, (2**64,), "ptr"),
            "free(True)": (shim.free, (True,), "ptr"),
            "malloc('8')": (shim.malloc, ("8",), "size"),
        }
        res = {k: [err(fn, *a), param] for k, (fn, a, param) in cases.items()}
        shim.free(p)
        emit({"res": res, "live": live(), "peek": shim.peekAtLastError()})
        """
    )
    res = out["res"]
    want_type = {k: "ValueError" for k in res}
    for k in ("free('abc')", "free(1.5)", "memcpy dst str", "streamSynchronize([])",
              "pointerGetAttributes(b'')", "free(True)", "malloc('8')"):
        want_type[k] = "TypeError"
    wrong = {}
    for k, (e, param) in res.items():
        if e is None or e["type"] != want_type[k] or not re.search(rf"\b{param}\b", e["text"]):
            wrong[k] = e and (e["type"], e["text"])
    assert wrong == {}
    assert out["live"]["allocations"] == 0 and out["peek"] == 0


def test_ipc_handle_must_be_exactly_64_bytes(fake_cudart):
    """IPC handles of 63 or 65 bytes raise ValueError stating the size; a 64-byte
    handle that is not one raises GpuRuntimeError cudaErrorInvalidResourceHandle."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        emit({"63": err(shim.ipcOpenMemHandle, bytes(63)), "65": err(shim.ipcOpenMemHandle, bytes(65)),
              "0": err(shim.ipcOpenMemHandle, b""), "garbage": err(shim.ipcOpenMemHandle, b"\\x17" * 64),
              "peek": shim.peekAtLastError(), "live": live()})
        """
    )
    for n in ("63", "65", "0"):
        assert out[n]["type"] == "ValueError" and "64" in out[n]["text"] and f"got {n}" in out[n]["text"]
    g = out["garbage"]
    assert g["type"] == "GpuRuntimeError" and g["status"] == 400
    assert "cudaErrorInvalidResourceHandle" in g["text"] and g["call"] == "IpcOpenMemHandle"
    assert out["peek"] == 0 and out["live"]["ipc_mappings"] == 0


def test_calls_before_bind_and_after_reset_raise_unavailable(fake_cudart):
    """Every runtime call raises GpuRuntimeUnavailable before any bind, and again
    after rt.reset() (never a crash through a null function pointer)."""
    out = fake_cudart.run(
        CALL_ARGS,
        """
        def sweep():
            return {n: (err(getattr(shim, n), *CALL_ARGS[n]) or {"type": None})["type"] for n in PUBLIC}
        before = sweep()
        rt.ensure_bound()
        bound_ok = shim.getDeviceCount()
        rt.reset()
        emit({"before": before, "bound_ok": bound_ok, "after_reset": sweep(), "bound": shim.is_bound()})
        """
    )
    assert len(out["before"]) >= 41
    assert set(out["before"].values()) == {"GpuRuntimeUnavailable"}
    assert out["bound_ok"] == 1
    assert set(out["after_reset"].values()) == {"GpuRuntimeUnavailable"}
    assert out["bound"] is False


def test_freed_pointers_and_closed_handles_fail_cleanly(fake_cudart):
    """Use after free or destroy gives the runtime's error as GpuRuntimeError, never a
    crash: copying into freed memory, copying past an allocation's end, destroying
    or using a destroyed stream or event, unregistering twice."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        host = ctypes.create_string_buffer(256)
        a = ctypes.addressof(host)
        p = shim.malloc(128)
        past_end = err(shim.memcpy, p, a, 256, shim.MEMCPY_HOST_TO_DEVICE)
        shim.free(p)
        into_freed = err(shim.memcpy, p, a, 16, shim.MEMCPY_HOST_TO_DEVICE)
        memset_freed = err(shim.memset, p, 0, 16)
        s = shim.streamCreateWithFlags(); shim.streamDestroy(s)
        e = shim.eventCreateWithFlags(); shim.eventDestroy(e)
        shim.hostRegister(a, 256); shim.hostUnregister(a)
        emit({"past_end": past_end, "into_freed": into_freed, "memset_freed": memset_freed,
              "stream_twice": err(shim.streamDestroy, s), "sync_closed": err(shim.streamSynchronize, s),
              "record_closed": err(shim.eventRecord, e, 0), "event_twice": err(shim.eventDestroy, e),
              "unregister_twice": err(shim.hostUnregister, a), "live": live(), "peek": shim.peekAtLastError()})
        """
    )
    for key, status in {"past_end": 1, "into_freed": 1, "memset_freed": 1, "stream_twice": 400,
                        "sync_closed": 400, "record_closed": 400, "event_twice": 400,
                        "unregister_twice": 713}.items():
        assert out[key] and out[key]["type"] == "GpuRuntimeError" and out[key]["status"] == status, key
    assert set(out["live"].values()) == {0} and out["peek"] == 0


def test_event_timing_rules(fake_cudart):
    """eventElapsedTime refuses DisableTiming and never-recorded events (400, as CUDA);
    Interprocess without DisableTiming is refused at creation (1)."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        a = shim.eventCreateWithFlags(shim.EVENT_DISABLE_TIMING); b = shim.eventCreateWithFlags()
        unrecorded = err(shim.eventElapsedTime, b, b)
        shim.eventRecord(a, 0); shim.eventRecord(b, 0)
        no_timing = err(shim.eventElapsedTime, a, b)
        ipc_bad = err(shim.eventCreateWithFlags, shim.EVENT_INTERPROCESS)
        c = shim.eventCreateWithFlags(shim.EVENT_INTERPROCESS | shim.EVENT_DISABLE_TIMING)
        for x in (a, b, c): shim.eventDestroy(x)
        emit({"unrecorded": unrecorded, "no_timing": no_timing, "ipc_bad": ipc_bad, "live": live()})
        """
    )
    assert out["unrecorded"]["status"] == 400 and out["no_timing"]["status"] == 400
    assert out["ipc_bad"]["status"] == 1 and out["ipc_bad"]["call"] == "EventCreateWithFlags"
    assert out["live"]["events"] == 0


def test_host_register_twice_is_712(fake_cudart):
    """Registering an already registered range (or a part of it) raises
    cudaErrorHostMemoryAlreadyRegistered (712); the first registration survives."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        buf = ctypes.create_string_buffer(8192); a = ctypes.addressof(buf)
        shim.hostRegister(a, 8192)
        twice = err(shim.hostRegister, a, 8192)
        overlap = err(shim.hostRegister, a + 4096, 100)
        n = live()["registrations"]
        shim.hostUnregister(a)
        emit({"twice": twice, "overlap": overlap, "n": n, "live": live()})
        """
    )
    for k in ("twice", "overlap"):
        assert out[k]["status"] == 712 and out[k]["name"] == "cudaErrorHostMemoryAlreadyRegistered"
    assert out["n"] == 1 and out["live"]["registrations"] == 0


# ------------------------------------------------------------------ IPC across processes


def test_ipc_memory_shared_between_two_processes(fake_cudart):
    """A handle made in one process opens in another, which reads the owner's bytes
    and writes bytes the owner then sees; mapping and closing are counted; once the
    owner frees the memory, opening the handle fails cleanly (400)."""
    owner = fake_cudart.popen(
        """
        rt.ensure_bound()
        N = 4096
        d = shim.malloc(N)
        data = os.urandom(N)
        src = ctypes.create_string_buffer(data, N)
        shim.memcpy(d, ctypes.addressof(src), N, shim.MEMCPY_HOST_TO_DEVICE)
        emit({"handle": shim.ipcGetMemHandle(d).hex(), "data": data.hex(), "pid": os.getpid()})
        sys.stdin.readline()
        back = ctypes.create_string_buffer(N)
        shim.memcpy(ctypes.addressof(back), d, N, shim.MEMCPY_DEVICE_TO_HOST)
        shim.free(d)
        emit({"now": back.raw.hex(), "live": live()})
        sys.stdin.readline()
        """
    )
    try:
        first = fake_cudart.read_emit(owner.stdout.readline())
        try:  # the fake maps the owner's memory through /proc/<pid>/fd
            os.listdir(f"/proc/{first['pid']}/fd")
        except OSError as e:
            pytest.skip(f"cannot read another process's /proc/<pid>/fd here: {e}")
        peer_code = """
            rt.ensure_bound()
            h = bytes.fromhex(os.environ["HANDLE"])
            try:
                p = shim.ipcOpenMemHandle(h)
            except errors.GpuRuntimeError:
                emit({"opened": err(shim.ipcOpenMemHandle, h), "live": live()}); sys.exit(0)
            N = 4096
            got = ctypes.create_string_buffer(N)
            shim.memcpy(ctypes.addressof(got), p, N, shim.MEMCPY_DEVICE_TO_HOST)
            mine = ctypes.create_string_buffer(b"peer wrote this!", 16)
            shim.memcpy(p + 100, ctypes.addressof(mine), 16, shim.MEMCPY_HOST_TO_DEVICE)
            attrs = shim.pointerGetAttributes(p)
            bad_flags = err(shim.ipcOpenMemHandle, h, 2)
            mapped = live()["ipc_mappings"]
            shim.ipcCloseMemHandle(p)
            emit({"got": got.raw.hex(), "attrs": attrs, "p": p, "mapped": mapped, "bad_flags": bad_flags,
                  "close_twice": err(shim.ipcCloseMemHandle, p), "live": live()})
            """
        peer = fake_cudart.run(peer_code, HANDLE=first["handle"])
        owner.stdin.write("go\n")
        owner.stdin.flush()
        second = fake_cudart.read_emit(owner.stdout.readline())
        stale = fake_cudart.run(peer_code, HANDLE=first["handle"])
        owner.stdin.write("done\n")
        owner.stdin.flush()
        assert owner.wait(timeout=30) == 0, owner.stderr.read()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
    assert peer["got"] == first["data"]
    assert peer["attrs"] == ["device", 0, peer["p"], 0]
    assert peer["mapped"] == 1 and peer["live"]["ipc_mappings"] == 0
    assert peer["bad_flags"]["status"] == 1
    assert peer["close_twice"]["status"] == 1 and peer["close_twice"]["call"] == "IpcCloseMemHandle"
    expected = bytearray.fromhex(first["data"])
    expected[100:116] = b"peer wrote this!"
    assert second["now"] == expected.hex()
    assert second["live"]["allocations"] == 0
    assert stale["opened"]["status"] == 400 and "cudaErrorInvalidResourceHandle" in stale["opened"]["text"]
    assert stale["live"]["ipc_mappings"] == 0


# ------------------------------------------------------------------ GIL


SLEEP_MS = 400


def test_blocking_calls_release_the_gil(fake_cudart):
    """While the runtime blocks (the fake sleeps in every *Synchronize), another Python
    thread keeps running: its longest stall stays far below the call's length.  The
    same runtime call made through ctypes.PyDLL (which holds the GIL) stalls the
    thread for the whole call, proving the measurement can tell the difference."""
    out = fake_cudart.run(
        """
        import threading, time
        rt.ensure_bound()
        s = shim.streamCreateWithFlags(); e = shim.eventCreateWithFlags(); shim.eventRecord(e, s)
        st = {"n": 0, "gap": 0.0, "stop": False}
        def counter():
            last = time.perf_counter()
            while not st["stop"]:
                now = time.perf_counter()
                st["gap"] = max(st["gap"], now - last)
                last = now
                st["n"] += 1
        th = threading.Thread(target=counter); th.start()
        while st["n"] < 1000:
            time.sleep(0.001)
        def measure(call):
            st["gap"] = 0.0; n0 = st["n"]; t0 = time.perf_counter()
            call()
            dt = time.perf_counter() - t0
            return {"dt": dt, "gap": st["gap"], "advanced": st["n"] - n0}
        res = {
            "streamSynchronize": measure(lambda: shim.streamSynchronize(s)),
            "eventSynchronize": measure(lambda: shim.eventSynchronize(e)),
            "deviceSynchronize": measure(shim.deviceSynchronize),
        }
        held = ctypes.PyDLL(FAKE_PATH)
        res["control_gil_held"] = measure(lambda: held.cudaStreamSynchronize(None))
        st["stop"] = True; th.join()
        shim.eventDestroy(e); shim.streamDestroy(s)
        emit(res)
        """,
        FAKE_CUDART_SLEEP_MS=str(SLEEP_MS),
    )
    sleep_s = SLEEP_MS / 1000
    control = out.pop("control_gil_held")
    assert control["dt"] >= sleep_s * 0.95 and control["gap"] >= sleep_s * 0.8, control
    for name, m in out.items():
        assert m["dt"] >= sleep_s * 0.95, (name, m)
        assert m["gap"] < sleep_s / 2, (name, m)
        assert m["advanced"] > 1000, (name, m)


# ------------------------------------------------------------------ the fake's switches


def test_fail_switch_counts_and_env_form(fake_cudart):
    """FAKE_CUDART_FAIL=Name:status:times fails exactly `times` calls, then the call works."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        r = [err(shim.malloc, 8)["status"], err(shim.malloc, 8)["status"]]
        p = shim.malloc(8)
        n = live()["allocations"]
        shim.free(p)
        emit({"r": r, "n": n, "live": live()})
        """,
        FAKE_CUDART_FAIL="cudaMalloc:2:2",
    )
    assert out["r"] == [2, 2]
    assert out["n"] == 1 and out["live"]["allocations"] == 0


def test_no_leak_over_many_lifetimes(fake_cudart):
    """Creating and destroying every kind of object many times leaves the counters at
    zero and device memory fully returned (memGetInfo free == total)."""
    out = fake_cudart.run(
        """
        rt.ensure_bound()
        peak = None
        for i in range(200):
            p = shim.malloc(1024 + i); h = shim.hostAlloc(64)
            s = shim.streamCreateWithFlags(i % 2); e = shim.eventCreateWithFlags(i % 3)
            peak = live()
            shim.eventDestroy(e); shim.streamDestroy(s); shim.freeHost(h); shim.free(p)
        free_b, total = shim.memGetInfo()
        emit({"peak": peak, "end": live(), "free": free_b, "total": total})
        """
    )
    assert out["peak"]["allocations"] == 1 and out["peak"]["streams"] == 1
    assert set(out["end"].values()) == {0}
    assert out["free"] == out["total"]


# ------------------------------------------------------------------ driver-level calls


def test_driver_calls_map_errors_and_leave_the_runtime_error_alone(fake_cudart, driver_env):
    """Driver-level failures raise with the driver's name and the call: unknown
    address -> CUDA_ERROR_NOT_FOUND; unaligned dma-buf range -> INVALID_VALUE; a
    forced 2 -> OutOfMemoryError; a forced 100 -> NoDeviceError.  None of them
    touches the runtime's last error."""
    out = fake_cudart.run(
        """
        import mmap
        rt.ensure_bound()
        p = shim.malloc(2 * mmap.PAGESIZE)
        res = {"unknown": err(shim.memGetAddressRange, 0x1000),
               "unaligned": err(shim.memGetDmaBufFd, p + 1, mmap.PAGESIZE),
               "negative": err(shim.memGetDmaBufFd, p, -1)}
        fail("MemGetHandleForAddressRange", 2); res["oom"] = err(shim.memGetDmaBufFd, p, mmap.PAGESIZE)
        fail("Init", 100); res["nodev"] = err(shim.driverInit)
        res["peek"] = shim.peekAtLastError()
        shim.free(p)
        emit(res)
        """,
        **driver_env,
    )
    assert out["unknown"]["type"] == "GpuRuntimeError"
    assert (out["unknown"]["status"], out["unknown"]["name"], out["unknown"]["call"]) == \
        (500, "CUDA_ERROR_NOT_FOUND", "MemGetAddressRange")
    assert (out["unaligned"]["status"], out["unaligned"]["name"]) == (1, "CUDA_ERROR_INVALID_VALUE")
    assert out["negative"]["type"] == "ValueError" and "size" in out["negative"]["text"]
    assert out["oom"]["type"] == "OutOfMemoryError" and out["oom"]["call"] == "MemGetHandleForAddressRange"
    assert out["nodev"]["type"] == "NoDeviceError" and out["nodev"]["name"] == "CUDA_ERROR_NO_DEVICE"
    assert out["peek"] == 0


def test_driver_calls_without_libcuda_raise_unavailable(fake_cudart, tmp_path):
    """With no libcuda.so.1 to bind, the runtime still binds and works, and each
    driver-level call raises GpuRuntimeUnavailable naming itself and what was searched."""
    out = fake_cudart.run(
        """
        try:
            ctypes.CDLL("libcuda.so.1")
            emit({"skip": "a libcuda.so.1 is installed here"}); sys.exit(0)
        except OSError:
            pass
        rt.ensure_bound()
        emit({"n": shim.getDeviceCount(),
              "calls": {n: err(getattr(shim, n), *a) for n, a in
                        (("memGetAddressRange", (4096,)), ("memGetDmaBufFd", (4096, 4096)), ("driverInit", ()))}})
        """
    )
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["n"] == 1
    for name, e in out["calls"].items():
        assert e["type"] == "GpuRuntimeUnavailable", name
        assert e["text"].startswith(f"{name} is not available: ") and "libcuda.so.1" in e["text"], name
