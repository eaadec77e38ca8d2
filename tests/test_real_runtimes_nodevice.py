"""The real GPU runtimes on a machine without a GPU: clear errors, no crash, no hang.

Each case runs in its own Python subprocess with a timeout, so a segfault or a
hang in a vendor library fails the test instead of killing pytest.  Proven here:

* the loader (``monarch_cy._runtime``) binds the real ``libcudart.so.13`` (CUDA
  toolkit and/or the ``nvidia-cuda-runtime`` wheel) and Debian's
  ``libamdhip64.so.5``, by explicit path (``MONARCH_CY_GPU_RUNTIME_LIBRARY``) and
  by platform search (``MONARCH_CY_GPU_PLATFORM``), reporting the right
  platform, version, table and all symbols, and mapping no other GPU runtime;
* with no device, ``getDeviceCount()`` raises ``NoDeviceError`` carrying the
  vendor's error name (cudaErrorInsufficientDriver without a driver,
  hipErrorNoDevice); other calls raise a ``GpuRuntimeError``; ``driverGetVersion()``
  is 0 on CUDA without a driver; ``malloc(-1)`` raises ``ValueError`` naming
  ``size``; calls before binding and after ``reset()`` raise ``GpuRuntimeUnavailable``;
  the errors survive pickling;
* bad settings (``bogus`` platform, ``none``, a library path that does not exist)
  raise the documented errors, the last one listing the place tried;
* importing ``monarch_cy`` and ``monarch_cy.gpu`` maps no GPU library.

A missing library skips its cases with the command that installs it.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_LIB = r"lib(cudart|amdhip64|hsa-runtime64)\.so|libcuda\.so"

CUDA_INSTALL = (f"`{sys.executable} -m pip install nvidia-cuda-runtime==13.0.96` "
                "or install the CUDA 13 toolkit (CUDA_HOME)")
HIP_INSTALL = "`apt-get install libamdhip64-5` (Debian) or install ROCm (ROCM_PATH)"


def _find(platform: str) -> list[tuple[str, str]]:
    """(label, path) of each distinct real library file for the platform."""
    if platform == "cuda":
        soname, places = "libcudart.so.13", []
        for env in ("CUDA_HOME", "CUDA_PATH"):
            if os.environ.get(env):
                places += [(f"${env}", Path(os.environ[env]) / d) for d in ("lib64", "lib")]
        places += [("toolkit", Path("/usr/local/cuda") / d) for d in ("lib64", "lib")]
        spec = importlib.util.find_spec("nvidia")
        for loc in (spec.submodule_search_locations or []) if spec else []:
            places.append(("wheel", Path(loc) / "cu13" / "lib"))
    else:
        soname, places = "libamdhip64.so.5", []
        if os.environ.get("ROCM_PATH"):
            places.append(("$ROCM_PATH", Path(os.environ["ROCM_PATH"]) / "lib"))
        multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
        places += [("/opt/rocm", Path("/opt/rocm/lib")), ("system", Path("/usr/lib") / multiarch),
                   ("system", Path("/usr/lib64"))]
    out, seen = [], set()
    for label, d in places:
        f = d / soname
        if f.exists() and f.resolve() not in seen:
            seen.add(f.resolve())
            out.append((label, str(f)))
    return out


LIBS = {p: _find(p) for p in ("cuda", "rocm")}
HAS_DEVICE = {"cuda": os.path.exists("/dev/nvidiactl"), "rocm": os.path.exists("/dev/kfd")}
CUDA_DRIVER = ctypes.util.find_library("cuda") is not None


def _run(script: str, env_updates: dict[str, str], timeout: float = 60) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONARCH_CY_")}
    env.update(env_updates)
    r = subprocess.run([sys.executable, "-c", CHILD_PRELUDE + script], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"child died (rc {r.returncode}):\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


CHILD_PRELUDE = r"""
import json, os, pickle, re
def gpu_maps():
    with open("/proc/self/maps") as f:
        return sorted({os.path.realpath(l.split()[-1]) for l in f
                       if re.search(r"%s", l.split()[-1])})
def outcome(fn, *args):
    try:
        return {"value": fn(*args)}
    except Exception as e:
        back = pickle.loads(pickle.dumps(e))
        return {"error": type(e).__name__, "classes": [c.__name__ for c in type(e).__mro__],
                "text": str(e), "status": getattr(e, "status", None),
                "name": getattr(e, "name", None), "tried": list(getattr(e, "tried", ())),
                "pickle_same": type(back) is type(e) and str(back) == str(e)
                and vars(back) == vars(e)}
""" % GPU_LIB

BIND_SCRIPT = r"""
from monarch_cy import _runtime, _hip_shim as shim
r = {"maps_before": gpu_maps(), "before_bind": outcome(shim.getDeviceCount)}
b = _runtime.ensure_bound()
r["binding"] = {"platform": b.platform, "path": os.path.realpath(b.path), "version": b.version,
                "table": b.table.name, "symbols": b.symbols, "bound": shim.bound_platform(),
                "names": [list(p) for p in shim.function_names()]}
r["maps_bound"] = gpu_maps()
for key, fn, args in [("count", shim.getDeviceCount, ()), ("driver", shim.driverGetVersion, ()),
                      ("runtime", shim.runtimeGetVersion, ()), ("malloc_neg", shim.malloc, (-1,)),
                      ("malloc", shim.malloc, (16,)), ("props", shim.getDeviceProperties, (0,))]:
    r[key] = outcome(fn, *args)
_runtime.reset()
r["after_reset"] = outcome(shim.getDeviceCount)
r["rebound"] = _runtime.ensure_bound().platform
print(json.dumps(r))
"""


def _bind_cases():
    cases = []
    for plat, install in (("cuda", CUDA_INSTALL), ("rocm", HIP_INSTALL)):
        soname = "libcudart.so.13" if plat == "cuda" else "libamdhip64.so.5"
        for label, path in LIBS[plat]:
            cases.append(pytest.param(plat, {"MONARCH_CY_GPU_RUNTIME_LIBRARY": path}, path,
                                      id=f"{plat}-path-{label.strip('$/')}"))
        marks = [] if LIBS[plat] else [pytest.mark.skip(reason=f"no {soname}: {install}")]
        cases.append(pytest.param(plat, {"MONARCH_CY_GPU_PLATFORM": plat}, None,
                                  id=f"{plat}-search", marks=marks))
    return cases


@pytest.mark.parametrize("platform,env,path", _bind_cases())
def test_real_runtime_without_device(platform, env, path):
    if HAS_DEVICE[platform]:
        pytest.skip(f"a {platform} device node exists: the no-device paths cannot be reached here")
    r = _run(BIND_SCRIPT, env)
    assert r["maps_before"] == [], "importing the shim mapped a GPU library"
    assert r["before_bind"]["error"] == "GpuRuntimeUnavailable"
    assert "not bound" in r["before_bind"]["text"] and r["before_bind"]["pickle_same"]

    b = r["binding"]
    prefix = "cuda" if platform == "cuda" else "hip"
    assert b["platform"] == b["bound"] == r["rebound"] == platform
    if path is not None:
        assert b["path"] == os.path.realpath(path)
    # Only the bound library is mapped: no second runtime of either vendor
    # (libamdhip64 brings its own libhsa-runtime64, which is no runtime of ours).
    assert [m for m in r["maps_bound"] if re.search("libcudart|libamdhip64", m)] == [b["path"]]
    major = b["version"] // 1000 if platform == "cuda" else b["version"] // 10_000_000
    assert (major, b["table"]) == ((13, "cuda13") if platform == "cuda" else (5, "hip5"))
    assert r["runtime"] == {"value": b["version"]}
    # Every entry of the call table is bound, to a symbol of this vendor.
    assert sorted(b["symbols"]) == sorted(c[len("cuda"):] for c, _ in b["names"])
    assert all(s.startswith(prefix) for s in b["symbols"].values())
    assert [b["symbols"][c[4:]] for c, h in b["names"]] == [c if prefix == "cuda" else h
                                                           for c, h in b["names"]]

    count = r["count"]
    if platform == "cuda":
        want = {"cudaErrorInsufficientDriver"} if not CUDA_DRIVER else {
            "cudaErrorNoDevice", "cudaErrorInsufficientDriver"}
    else:
        want = {"hipErrorNoDevice"}
    assert count.get("error") == "NoDeviceError", count
    assert count["name"] in want and count["name"] in count["text"]
    assert "GetDeviceCount" in count["text"] and "GpuRuntimeError" in count["classes"]
    assert count["status"] in (35, 100) and count["pickle_same"]
    if platform == "cuda" and not CUDA_DRIVER:
        assert r["driver"] == {"value": 0}

    neg = r["malloc_neg"]
    assert neg["error"] == "ValueError" and "size" in neg["text"] and "-1" in neg["text"]
    for key, call in (("malloc", "Malloc"), ("props", "GetDeviceProperties")):
        res = r[key]
        assert "GpuRuntimeError" in res.get("classes", []), res
        assert res["name"].startswith(prefix + "Error") and f"{call}: {res['name']}" in res["text"]
        assert res["pickle_same"]

    assert r["after_reset"]["error"] == "GpuRuntimeUnavailable"


SETTINGS_SCRIPT = r"""
from monarch_cy import _runtime
r = {}
for key, var, value in [("bogus", "MONARCH_CY_GPU_PLATFORM", "bogus"),
                        ("none", "MONARCH_CY_GPU_PLATFORM", "none"),
                        ("missing", "MONARCH_CY_GPU_RUNTIME_LIBRARY", "/nonexistent/libcudart.so.13")]:
    os.environ.pop("MONARCH_CY_GPU_PLATFORM", None)
    os.environ[var] = value
    _runtime.reset()
    r[key] = outcome(_runtime.ensure_bound)
    r[key]["bound"] = _runtime.current() is not None
r["maps"] = gpu_maps()
print(json.dumps(r))
"""


def test_bad_settings_raise_clear_errors():
    r = _run(SETTINGS_SCRIPT, {})
    bogus, none, missing = r["bogus"], r["none"], r["missing"]
    assert bogus["error"] == "ValueError" and "'bogus'" in bogus["text"]
    assert "MONARCH_CY_GPU_PLATFORM" in bogus["text"]
    assert none["error"] == "GpuRuntimeUnavailable" and "none" in none["text"]
    assert missing["error"] == "GpuRuntimeUnavailable" and missing["pickle_same"]
    assert len(missing["tried"]) == 1 and "/nonexistent/libcudart.so.13" in missing["tried"][0]
    assert "/nonexistent/libcudart.so.13" in missing["text"]
    assert "MonarchCyError" in missing["classes"] and "RuntimeError" in missing["classes"]
    assert not any(x["bound"] for x in (bogus, none, missing))
    assert r["maps"] == []


IMPORT_SCRIPT = r"""
import importlib, importlib.util, sys
mods = ["monarch_cy", "monarch_cy.errors", "monarch_cy._runtime", "monarch_cy._hip_shim"]
if importlib.util.find_spec("monarch_cy.gpu") is not None:
    mods.append("monarch_cy.gpu")
for m in mods:
    importlib.import_module(m)
r = {"imported": mods, "maps": gpu_maps()}
if len(sys.argv) > 1:  # control: a library really loaded is seen by the same scan
    import ctypes
    ctypes.CDLL(sys.argv[1])
    r["control"] = gpu_maps()
print(json.dumps(r))
"""


def test_import_loads_no_gpu_library():
    control = next((p for plat in ("cuda", "rocm") for _, p in LIBS[plat]), None)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONARCH_CY_")}
    argv = [sys.executable, "-c", CHILD_PRELUDE + IMPORT_SCRIPT] + ([control] if control else [])
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "monarch_cy" in r["imported"] and r["maps"] == [], r["maps"]
    if control:
        assert os.path.realpath(control) in r["control"]
