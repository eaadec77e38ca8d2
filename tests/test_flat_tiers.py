"""The flat Cython tiers stay flat, and their ``.pxd`` C API works from other Cython code.

Flat: ``_hip_shim``, ``_nccl_shim``, ``_rdma`` and ``_hostmem`` import nothing of
monarch_cy but :mod:`monarch_cy._errors` (itself importing nothing of monarch_cy)
and each other -- checked on the sources and in a fresh interpreter.  The cimport
test compiles a small Cython module against ``_hip_shim.pxd`` / ``_nccl_shim.pxd``
and drives it against the fake CUDA runtime (and pip's NCCL where present).
"""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "monarch_cy"
TIERS = sorted(p.stem for p in PKG.glob("*.pyx"))
# the exception tree and its public face (which imports only the tree)
FLAT_MODULES = {"monarch_cy._errors", "monarch_cy.errors"} | {f"monarch_cy.{t}" for t in TIERS}
ABOVE = ("_collectives", "_actor", "_hosts", "_rdma_buffer", "_verbs", "gpu", "_gpu", "_train",
         "_transport", "collectives", "actor", "rdma", "train")

_STRINGS = re.compile(r'"""(?:.|\n)*?"""|\'\'\'(?:.|\n)*?\'\'\'')
_FROM = re.compile(r"^\s*from\s+(\.*[\w.]*)\s+c?import\s+\(?\s*([\w\s,.*]+?)\)?\s*(?:#.*)?$", re.M)
_IMPORT = re.compile(r"^\s*c?import\s+([\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)", re.M)


def imported_modules(source: str) -> set[str]:
    """Every module a .pyx/.pxd imports or cimports (docstrings and comments ignored)."""
    code = _STRINGS.sub("", source)
    code = "\n".join(line.split("#", 1)[0] if not line.lstrip().startswith("# cython:") else ""
                     for line in code.splitlines())
    # join parenthesised continuation lines: from x import (\n a,\n b,\n)
    code = re.sub(r"\(\s*\n([^)]*)\)", lambda m: "(" + " ".join(m.group(1).split()) + ")", code)
    mods = set()
    for m in _FROM.finditer(code):
        mod, names = m.group(1), m.group(2)
        mods.add(mod)
        if mod == "monarch_cy":                 # from monarch_cy cimport _hip_shim
            mods |= {f"monarch_cy.{n.split()[0]}" for n in names.split(",") if n.strip()}
    for m in _IMPORT.finditer(code):
        mods |= {part.split()[0] for part in m.group(1).split(",")}
    return mods


def test_the_import_parser_sees_every_form():
    src = textwrap.dedent('''
        """Docstring: from monarch_cy._actor import x
        import monarch_cy._train
        """
        # from monarch_cy._hosts import y
        from libc.stdint cimport uintptr_t
        import errno as _errno_mod, os
        from monarch_cy._errors import (
            GpuRuntimeError,
            NoDeviceError,
        )
        from monarch_cy cimport _hip_shim as hs
        cimport monarch_cy._rdma
        ''')
    assert imported_modules(src) == {"libc.stdint", "errno", "os", "monarch_cy._errors", "monarch_cy",
                                     "monarch_cy._hip_shim", "monarch_cy._rdma"}


@pytest.mark.parametrize("path", sorted(PKG.glob("*.pyx")) + sorted(PKG.glob("*.pxd")),
                         ids=lambda p: p.name)
def test_flat_tier_sources_import_nothing_above(path):
    mods = imported_modules(path.read_text())
    ours = {m for m in mods if m == "monarch_cy" or m.startswith(("monarch_cy.", "."))}
    assert not any(m.startswith(".") for m in ours), f"{path.name}: relative import {ours}"
    assert ours - {"monarch_cy"} <= FLAT_MODULES, f"{path.name} imports {sorted(ours - FLAT_MODULES)}"
    for m in ours:
        assert not any(m == f"monarch_cy.{a}" or m.startswith(f"monarch_cy.{a}.") for a in ABOVE), m


def test_errors_module_is_flat_itself():
    tree = ast.parse((PKG / "_errors.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("monarch_cy"), ast.dump(node)
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("monarch_cy") for a in node.names), ast.dump(node)


def test_importing_the_tiers_loads_nothing_above_them():
    code = textwrap.dedent(f"""
        import json, sys, monarch_cy
        before = set(sys.modules)
        for t in {TIERS!r}:
            __import__("monarch_cy." + t)
        print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith("monarch_cy"))))
        """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    loaded = set(json.loads(r.stdout))
    assert loaded <= FLAT_MODULES, sorted(loaded - FLAT_MODULES)


def test_flat_tier_errors_have_one_class_and_a_public_home():
    """The flat tiers raise errors defined in the flat _errors; every public path names
    the same class, and its __module__ is the public monarch_cy.errors (pickles and
    tracebacks name it, never a private module)."""
    import pickle

    from monarch_cy import _errors, errors
    from monarch_cy._verbs import VerbsError, VerbsUnavailable
    from monarch_cy.collectives import NcclError, NcclUnavailable

    assert NcclError is errors.NcclError is _errors.NcclError
    assert NcclUnavailable is errors.NcclUnavailable is _errors.NcclUnavailable
    assert NcclError.__module__ == NcclUnavailable.__module__ == "monarch_cy.errors"
    data = pickle.dumps(NcclError(4))
    assert b"monarch_cy.errors" in data and b"_collectives" not in data
    assert pickle.loads(data).name == "ncclInvalidArgument"
    assert VerbsError is _errors.VerbsError and VerbsUnavailable is _errors.VerbsUnavailable


def test_pxd_files_ship_with_the_package():
    """Every .pxd matches the package-data patterns (the wheel and sdist carry them),
    and so do the headers the .pxd files declare from."""
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["monarch_cy"]
    for rel in [p.name for p in PKG.glob("*.pxd")] + [f"include/{h.name}" for h in (PKG / "include").glob("*.h")]:
        assert any(fnmatch.fnmatch(rel, pat) for pat in patterns), rel
    assert {"_hip_shim.pxd", "_nccl_shim.pxd", "_rdma.pxd"} <= {p.name for p in PKG.glob("*.pxd")}


# ------------------------------------------------------------------ cimport from other Cython code

PROBE_PYX = '''
# cython: language_level=3
from monarch_cy cimport _hip_shim as hs
from monarch_cy cimport _nccl_shim as ns


def device_count():
    cdef hs.mcy_rt_table* t = hs.runtime_table()
    cdef int n = -1
    cdef hs.cudaError_t st
    with nogil:
        st = t.fn.GetDeviceCount(&n)
    hs.check_status(st, "GetDeviceCount")
    return n


def rt_status(int st):
    return hs.check_status(st, "Malloc")


def driver_status(int st):
    hs.driver_table()
    return hs.check_driver_status(st, "MemGetAddressRange")


def nccl_version():
    cdef ns.mcy_nccl_table* t = ns.nccl_table()
    cdef int v = 0
    cdef ns.ncclResult_t st
    with nogil:
        st = t.fn.GetVersion(&v)
    ns.check_result(st, "GetVersion", NULL)
    return v


def nccl_result(int st):
    return ns.check_result(st, "AllReduce", NULL)
'''


@pytest.fixture(scope="module")
def cimport_probe(tmp_path_factory):
    """The probe above, cythonized against the package's .pxd files and compiled."""
    pytest.importorskip("Cython")
    cc = shutil.which(os.environ.get("CC", "gcc"))
    if cc is None:
        pytest.skip("no C compiler (gcc or $CC)")
    d = tmp_path_factory.mktemp("cimport_probe")
    (d / "mcy_cimport_probe.pyx").write_text(PROBE_PYX)
    r = subprocess.run([sys.executable, "-m", "cython", "-3", "-I", str(ROOT), "mcy_cimport_probe.pyx"],
                       cwd=d, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    so = d / ("mcy_cimport_probe" + sysconfig.get_config_var("EXT_SUFFIX"))
    r = subprocess.run([cc, "-shared", "-fPIC", "-O1", f"-I{sysconfig.get_paths()['include']}",
                        f"-I{PKG / 'include'}", "mcy_cimport_probe.c", "-o", str(so)],
                       cwd=d, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return d


def test_cimported_runtime_table_is_the_bound_one(fake_cudart, cimport_probe):
    """Through the .pxd: unbound -> GpuRuntimeUnavailable (never a NULL call); bound to
    the fake -> the shim's own table (same device count), and statuses raise the
    shim's error classes with the runtime's names."""
    out = fake_cudart.run(
        f"""
        sys.path.insert(0, {str(cimport_probe)!r})
        import mcy_cimport_probe as p
        o = {{"unbound": err(p.device_count), "ok_unbound": p.rt_status(0),
              "fail_unbound": err(p.rt_status, 2)}}
        rt.ensure_bound()
        o["count"], o["shim_count"] = p.device_count(), shim.getDeviceCount()
        o["ok"], o["oom"], o["inval"] = p.rt_status(0), err(p.rt_status, 2), err(p.rt_status, 1)
        o["drv_ok"] = p.driver_status(0)
        emit(o)
        """,
        FAKE_CUDART_DEVICES="3",
    )
    assert out["unbound"]["type"] == "GpuRuntimeUnavailable" and "not bound" in out["unbound"]["text"]
    assert out["ok_unbound"] == 0 and out["fail_unbound"]["type"] == "GpuRuntimeUnavailable"
    assert out["count"] == out["shim_count"] == 3
    assert out["ok"] == 0 and out["drv_ok"] == 0
    assert out["oom"]["type"] == "OutOfMemoryError" and "MemoryError" in out["oom"]["mro"]
    assert (out["oom"]["name"], out["oom"]["call"]) == ("cudaErrorMemoryAllocation", "Malloc")
    assert out["inval"]["type"] == "GpuRuntimeError" and out["inval"]["name"] == "cudaErrorInvalidValue"


def test_cimported_nccl_table(fake_cudart, cimport_probe):
    """Through the .pxd: unbound -> NcclUnavailable; results 0/7 are 0/1 without a
    library; with pip's NCCL bound, the table is the shim's and failures are NcclError."""
    out = fake_cudart.run(
        f"""
        sys.path.insert(0, {str(cimport_probe)!r})
        import mcy_cimport_probe as p
        from monarch_cy import _nccl_shim
        from monarch_cy._collectives import _nccl_loader
        o = {{"unbound": err(p.nccl_version), "ok": p.nccl_result(0), "progress": p.nccl_result(7),
              "fail_unbound": err(p.nccl_result, 4)}}
        try:
            _nccl_loader.ensure_loaded()
        except Exception as e:
            o["no_nccl"] = str(e)
        else:
            o["version"], o["shim_version"] = p.nccl_version(), _nccl_shim.getVersion()
            o["fail"] = err(p.nccl_result, 4)
        emit(o)
        """,
        bind=False,
    )
    assert out["unbound"]["type"] == "NcclUnavailable" and "not bound" in out["unbound"]["text"]
    assert (out["ok"], out["progress"]) == (0, 1)
    assert out["fail_unbound"]["type"] == "NcclUnavailable"
    if "no_nccl" in out:
        pytest.skip(f"no NCCL library to bind: {out['no_nccl'].splitlines()[0]}")
    assert out["version"] == out["shim_version"] >= 21300
    assert out["fail"]["type"] == "NcclError" and out["fail"]["name"] == "ncclInvalidArgument"
    assert out["fail"]["call"] == "AllReduce"
