"""The package as a user meets it: cheap import, public names, errors, CLI."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest

import monarch_cy
from monarch_cy import errors, gpu


def _run(code: str, **env) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_import_loads_no_gpu_library_and_no_torch():
    code = (
        "import sys, monarch_cy, monarch_cy.gpu, monarch_cy.errors\n"
        "maps = open('/proc/self/maps').read()\n"
        "print(int('libcudart' in maps or 'libamdhip64' in maps), int('torch' in sys.modules))\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "0"]


def test_public_gpu_names_are_complete():
    expected = {
        "Device", "DeviceProperties", "device_count", "Stream", "Event", "Memory",
        "DeviceMemory", "DeviceBuffer", "HostMemory", "HostRegistration", "PinnedBuffer",
        "IpcHandle", "IpcMapping", "copy", "wrap_torch", "UnprovenRuntimeWarning",
    }
    assert set(gpu.__all__) == expected
    # The public face: pickles and tracebacks name the module users import from.
    for name in expected - {"UnprovenRuntimeWarning"}:
        assert getattr(gpu, name).__module__ == "monarch_cy.gpu", name
    assert gpu.UnprovenRuntimeWarning.__module__ == "monarch_cy.errors"


def test_error_tree_and_pickling():
    e = errors.OutOfMemoryError(2, "cudaErrorMemoryAllocation", "out of memory", "Malloc")
    assert isinstance(e, MemoryError) and isinstance(e, errors.GpuRuntimeError)
    assert isinstance(e, monarch_cy.MonarchCyError)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is errors.OutOfMemoryError
    assert (back.status, back.name, back.message, back.call) == (2, "cudaErrorMemoryAllocation", "out of memory", "Malloc")
    assert str(back) == str(e)
    u = errors.GpuRuntimeUnavailable("nothing", ("a: no", "b: no"))
    back = pickle.loads(pickle.dumps(u))
    assert back.tried == ("a: no", "b: no") and "b: no" in str(back)
    assert isinstance(errors.ResourceClosedError("x"), ValueError)


def test_ipc_handle_validation_and_pickle():
    h = gpu.IpcHandle(bytes(range(64)), 4096, 0, "0000:01:00.0")
    data = pickle.dumps(h)
    assert b"monarch_cy.gpu" in data and b"_gpu" not in data
    back = pickle.loads(data)
    assert back == h and type(back) is gpu.IpcHandle
    for bad in (b"x" * 63, b"x" * 65, b""):
        with pytest.raises(ValueError, match=f"got {len(bad)}"):
            gpu.IpcHandle(bad, 1, 0)
    with pytest.raises(TypeError, match="bytes"):
        gpu.IpcHandle("x" * 64, 1, 0)
    with pytest.raises(ValueError, match="nbytes"):
        gpu.IpcHandle(b"x" * 64, -1, 0)
    with pytest.raises(ValueError, match="device"):
        gpu.IpcHandle(b"x" * 64, 1, -2)


def test_unknown_platform_is_a_clear_error():
    r = _run("import monarch_cy.gpu as g; g.device_count()", MONARCH_CY_GPU_PLATFORM="vulkan")
    assert r.returncode != 0
    assert "MONARCH_CY_GPU_PLATFORM='vulkan' is not a platform" in r.stderr


def test_platform_none_switches_gpu_off():
    r = _run("import monarch_cy.gpu as g; g.DeviceBuffer(16)", MONARCH_CY_GPU_PLATFORM="none")
    assert r.returncode != 0
    assert "GpuRuntimeUnavailable" in r.stderr and "switched off" in r.stderr


def test_info_command_reports_platform():
    r = subprocess.run(
        [sys.executable, "-m", "monarch_cy._cli", "info", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["monarch_cy"] == monarch_cy.__version__
    g = rep["gpu"]
    if g["bound"]:
        assert g["platform"] in ("cuda", "rocm") and g["library"] and g["found_via"]
    else:
        assert g["error"]
    assert set(rep["collectives"]) >= {"available"}
    assert set(rep["verbs"]) >= {"available"}
    text = subprocess.run(
        [sys.executable, "-m", "monarch_cy._cli", "info"], capture_output=True, text=True, timeout=120
    )
    assert text.returncode == 0 and "platform:" in text.stdout
