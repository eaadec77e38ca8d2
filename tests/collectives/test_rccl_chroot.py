"""RCCL for real: Debian trixie's ``librccl1`` (RCCL 2.13.4, HIP 5.7) in a chroot, no GPU.

RCCL is not in bookworm nor on PyPI, and trixie's build needs glibc 2.38, so it
runs in a ``debootstrap --variant=minbase trixie`` chroot with ``librccl1``,
``python3`` (3.13) and ``libpython3.13-dev`` (headers) installed.  The chroot is
built once and cached in ``/var/tmp/monarch_cy-rccl-trixie/root`` (about 1.1 GB;
delete the folder to rebuild).  Two probes run in it, each inside a private
mount namespace (``unshare --mount``) that mounts ``/proc``, ``/dev``, ``/sys``
for the chroot and vanishes with the probe, so no mount is left behind:

1. ``rccl/rccl_probe.c``, compiled here against ``monarch_cy/include/
   mcy_nccl_names.h`` in its default (no vendor header) mode: dlopens
   ``librccl.so.1``, fills the header's ``mcy_nccl`` table slot by slot from the
   header's own name list, and calls RCCL only through the table's typed
   pointers (``mcy_nccl.fn.GetVersion`` ...).  Proves the header's names,
   required/optional column, table layout, unique-id size and config prefix
   against the real library.  A negative control (a library that is not NCCL)
   shows the probe fails when the names are absent.
2. ``rccl/loader_probe.py`` with trixie's python3: monarch_cy's real loader
   (``_nccl_loader``, pure Python) and flat tier (``_nccl_shim``, compiled for
   Python 3.13 here from the same ``.pyx`` with Cython, against the chroot's
   Python headers) find, bind and call RCCL: platform "rocm", the system's
   soname, then ``MONARCH_CY_NCCL_LIBRARY``.

Checked: ``ncclGetVersion`` -> 21304 (2.13.4); ``ncclGetUniqueId`` succeeds with
128 non-zero bytes that differ between calls; ``ncclCommInitRank`` with no GPU
returns a failure result (not a crash, hang or a communicator) that surfaces as
``NcclError``; RCCL 2.13 lacks ``ncclCommInitRankConfig`` (2.14) and
``ncclCommSplit`` (2.18), which bind as missing optionals and raise
``NcclUnavailable`` naming the version when called.

Cost: building the chroot takes about 1.5 min (network and disk bound); once
cached the whole file takes a few seconds.  The build is time-boxed
(``MONARCH_CY_RCCL_BUILD_TIMEOUT``, default 180 s) and the tests skip with the
reason when it fails or runs over.  ``MONARCH_CY_RCCL_CHROOT=0`` skips them;
``MONARCH_CY_RCCL_CHROOT=require`` turns the skips into failures.  Needs root,
``debootstrap``, ``unshare``, ``chroot`` and ``gcc``: ``scripts/setup-rccl-test.sh``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import _debian_chroot

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "rccl"
HEADER_DIR = ROOT / "monarch_cy" / "include"
CACHE = Path(os.environ.get("MONARCH_CY_RCCL_CACHE", "/var/tmp/monarch_cy-rccl-trixie"))
PACKAGES = ("librccl1", "python3", "libpython3.13-dev")
BUILD_TIMEOUT = float(os.environ.get("MONARCH_CY_RCCL_BUILD_TIMEOUT", "180"))
MODE = os.environ.get("MONARCH_CY_RCCL_CHROOT", "1")
RCCL_IN_CHROOT = "/usr/lib/x86_64-linux-gnu/librccl.so.1"
SETUP = "scripts/setup-rccl-test.sh"

_build_error: str | None = None


def _skip(reason: str):
    if MODE == "require":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chroot() -> Path:
    """The cached trixie chroot with librccl1, built under a lock on first use."""
    global _build_error
    if MODE == "0":
        pytest.skip("MONARCH_CY_RCCL_CHROOT=0")
    if not sys.platform.startswith("linux") or os.uname().machine != "x86_64":
        _skip("needs Linux on x86_64 (Debian's amd64 librccl1)")
    missing = _debian_chroot.missing_tools() + ([] if shutil.which("gcc") else ["gcc"])
    if missing:
        _skip(f"missing {', '.join(missing)}: run {SETUP} as root")
    if _build_error:
        _skip(_build_error)
    try:
        root, took = _debian_chroot.ensure(CACHE, "trixie", PACKAGES, timeout=BUILD_TIMEOUT,
                                           must_exist=RCCL_IN_CHROOT)
    except RuntimeError as e:  # network, disk, mirror: skip with the reason
        _build_error = f"could not build the trixie chroot with librccl1: {e}"
        _skip(_build_error)
    if took is not None:
        print(f"\n[rccl] built {root} in {took:.0f} s")
    return root


@pytest.fixture(scope="module")
def workdir(chroot):
    """A fresh folder inside the chroot (its /tmp), removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="mcy-rccl-", dir=chroot / "tmp"))
    yield d
    _debian_chroot.remove_tree(d)


@pytest.fixture(scope="module")
def probe(chroot, workdir) -> str:
    """rccl_probe compiled here (host gcc, bookworm glibc: runs on trixie's newer glibc); path inside the chroot."""
    exe = workdir / "rccl_probe"
    r = subprocess.run(
        ["gcc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror", "-O1", f"-I{HEADER_DIR}",
         str(HERE / "rccl_probe.c"), "-o", str(exe), "-ldl"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return "/" + str(exe.relative_to(chroot))


def _json(r: subprocess.CompletedProcess) -> dict:
    assert r.stdout.strip().startswith("{"), f"exit {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}"
    return json.loads(r.stdout)


def test_header_table_binds_and_calls_real_rccl(chroot, probe):
    r = _debian_chroot.run(chroot, [probe, "librccl.so.1"])
    assert r.returncode == 0, r.stdout + r.stderr
    out = _json(r)
    print(json.dumps(out, indent=1))
    names = re.findall(r"^\s+X\((\w+), ([01]),", (HEADER_DIR / "mcy_nccl_names.h").read_text(), re.M)
    assert out["nfuncs"] == len(names) and out["sizeof_table"] == len(names) * 8
    assert out["fn_equals_slot"] is True
    # RCCL 2.13.4 predates exactly the two functions the header marks optional.
    optional = sorted(f"nccl{n}" for n, req in names if req == "0")
    assert sorted(out["missing_optional"]) == optional == ["ncclCommInitRankConfig", "ncclCommSplit"]
    assert out["comm_init_rank_config"] is None
    assert out["get_version"] == [0, 21304]
    assert out["error_string_success"] and out["error_string_invalid_argument"].startswith("invalid argument")
    assert out["unique_id"] == {"results": [0, 0], "bytes": 128, "nonzero": True, "distinct": True}
    init = out["comm_init_rank"]
    assert 1 <= init["result"] <= 8 and init["comm_null"] is True, init
    assert init["error_string"] and init["last_error"], init


def test_probe_fails_on_a_library_that_is_not_nccl(chroot, probe):
    """Negative control: the same probe against libz reports the required names missing."""
    r = _debian_chroot.run(chroot, [probe, "libz.so.1"])
    assert r.returncode == 3, r.stdout + r.stderr
    out = _json(r)
    assert "REQUIRED:ncclGetVersion" in out["missing_optional"] and out["error"] == "missing required"


def _shim_for_chroot_python(chroot: Path) -> Path:
    """_nccl_shim built for the chroot's python3.13 from this tree's .pyx (cached by content hash)."""
    pytest.importorskip("Cython", reason="Cython is needed to build _nccl_shim for Python 3.13")
    pyx = ROOT / "monarch_cy" / "_nccl_shim.pyx"
    inc = chroot / "usr" / "include" / "python3.13"
    if not (inc / "Python.h").is_file():
        pytest.fail(f"no Python.h in the chroot ({inc}): libpython3.13-dev missing")
    h = hashlib.sha256()
    for p in (pyx, pyx.with_suffix(".pxd"), HEADER_DIR / "mcy_nccl_names.h"):
        h.update(p.read_bytes())
    import Cython

    h.update(Cython.__version__.encode())
    out_dir = CACHE / f"shim313-{h.hexdigest()[:16]}"
    so = out_dir / "_nccl_shim.cpython-313-x86_64-linux-gnu.so"
    if so.is_file():
        return so
    tmp = Path(tempfile.mkdtemp(prefix="shim313-", dir=CACHE))
    try:
        c = tmp / "_nccl_shim.c"
        r = subprocess.run([sys.executable, "-m", "cython", "-3", str(pyx), "-o", str(c)],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        # -idirafter: host headers first; only what the host lacks (the chroot's
        # x86_64-linux-gnu/python3.13/pyconfig.h) comes from the chroot.
        r = subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-w", f"-I{inc}", "-idirafter", str(chroot / "usr" / "include"),
                            f"-I{HEADER_DIR}", str(c), "-o", str(tmp / so.name)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        _debian_chroot.remove_tree(out_dir)
        tmp.rename(out_dir)
    finally:
        _debian_chroot.remove_tree(tmp)
    return so


def test_monarch_cy_loader_and_shim_bind_rccl_under_trixie_python(chroot, workdir):
    so = _shim_for_chroot_python(chroot)
    pkg = workdir / "py"
    for src in (ROOT / "monarch_cy").rglob("*.py"):
        dst = pkg / src.relative_to(ROOT)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    shutil.copy2(so, pkg / "monarch_cy" / so.name)
    shutil.copy2(HERE / "loader_probe.py", pkg / "loader_probe.py")
    inside = "/" + str(pkg.relative_to(chroot))
    r = _debian_chroot.run(chroot, ["python3", f"{inside}/loader_probe.py"],
                       env={"PYTHONPATH": inside, "PYTHONDONTWRITEBYTECODE": "1",
                            "MONARCH_CY_GPU_PLATFORM": "rocm", "RCCL_PATH": RCCL_IN_CHROOT})
    assert r.returncode == 0, r.stdout + r.stderr
    out = _json(r)
    print(json.dumps(out, indent=1))
    missing = ["ncclCommInitRankConfig", "ncclCommSplit"]
    search = out["search"]
    assert (search["platform"], search["source"], search["library"]) == ("rocm", "system", "RCCL"), search
    assert (search["version"], search["version_text"]) == (21304, "2.13.4"), search
    assert search["path"].endswith("librccl.so.1") and search["missing_optional"] == missing, search
    assert out["env"]["source"] == "env" and out["env"]["path"] == RCCL_IN_CHROOT and out["env"]["version"] == 21304
    assert out["shim_version"] == 21304
    assert out["has"] == {"CommInitRankConfig": False, "CommSplit": False, "AllReduce": True, "GetLastError": True}
    assert out["uid"] == {"len": 128, "distinct": True, "nonzero": True} and out["uid_pickles"] is True
    init = out["init"]
    assert init is not None, "ncclCommInitRank succeeded without a GPU"
    assert init["type"] == "NcclError" and init["call"] == "CommInitRank" and 1 <= init["result"] <= 8, init
    assert init["name"].startswith("nccl") and init["message"], init
    assert out["config"] is not None and out["config"]["type"] == "NcclUnavailable", out["config"]
    assert "CommInitRankConfig" in out["config"]["text"] and "2.14" in out["config"]["text"], out["config"]
