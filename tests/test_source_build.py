"""Source builds against real vendor headers: ``MONARCH_CY_GPU_PLATFORM=cuda|rocm pip install .``

The README documents two vendor-checked source builds; this file runs both the way a
user would (``pip wheel`` of a copy of the tree, so no stale object of another build is
reused), each against headers the suite already has:

* CUDA: the CUDA 13.0 runtime header wheels the ABI proofs install
  (``CUDA_HOME=<wheel>/nvidia/cu13``, see :mod:`_vendor_wheels`);
* ROCm: Debian's HIP headers (``ROCM_PATH=/usr``, installed by
  ``scripts/setup-rccl-test.sh``).

Each build must succeed, compile every extension with the vendor macro and the
vendor's include folder on its command line, and produce a wheel whose extensions
link no vendor library.  Negative controls: the same build against a copy of the
headers with one value changed (``cudaErrorNotReady``/``hipErrorNotReady`` 600 ->
601) fails and names the constant; a platform whose headers are missing fails with
the message naming the variable to set, before compiling anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import _vendor_wheels
from _extensions import SO_STEMS, so_in

ROOT = Path(__file__).resolve().parents[1]
CUDA_RELEASE = "13.0.96"          # a key of _vendor_wheels.CUDA_WHEELS (one include folder)
HIP_HEADERS = Path("/usr/include/hip")
TOP_FILES = ("setup.py", "pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE",
             "MANIFEST.in")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _tree(dest: Path) -> Path:
    """A copy of the package sources (no build products) at ``dest``."""
    skip = shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.egg-info", "build")
    shutil.copytree(ROOT / "monarch_cy", dest / "monarch_cy", ignore=skip)
    for name in TOP_FILES:
        if (ROOT / name).is_file():
            shutil.copy(ROOT / name, dest / name)
    return dest


def _pip_wheel(tmp: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, Path]:
    tree = _tree(tmp / "src")
    out = tmp / "wheel"
    clean = {k: v for k, v in os.environ.items()
             if k not in ("MONARCH_CY_GPU_PLATFORM", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH")}
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps",
                        "--no-build-isolation", "--no-index", "-w", str(out), str(tree)],
                       capture_output=True, text=True, timeout=800, env={**clean, **env})
    return r, out


def _cuda_home() -> Path:
    include = _vendor_wheels.cuda_headers(CUDA_RELEASE)[0]
    assert (include / "cuda_runtime_api.h").is_file(), include
    return include.parent


def _hip_root() -> Path:
    if not (HIP_HEADERS / "hip_runtime_api.h").is_file():
        pytest.skip(f"no {HIP_HEADERS}/hip_runtime_api.h: run scripts/setup-rccl-test.sh "
                    "as root (Debian's libamdhip64-dev)")
    return HIP_HEADERS.parent.parent


def _compile_lines(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if " -c " in ln and ".c" in ln and "gcc" in ln]


def _check_built(r, out: Path, macro: str, include: Path) -> None:
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-4000:]
    lines = _compile_lines(log)
    assert len(lines) == len(SO_STEMS), "\n".join(lines) or log[-3000:]
    for ln in lines:
        assert f"-D{macro}=1" in ln and f"-I{include}" in ln, ln
    (wheel,) = out.glob("monarch_cy-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    for stem in SO_STEMS:
        assert len(so_in(names, stem)) == 1, (stem, names)


def _mutated(src: Path, dest: Path, header: str, old: str, new: str) -> Path:
    shutil.copytree(src, dest)
    path = dest / header
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not in {path} exactly once"
    path.write_text(text.replace(old, new))
    return dest


def test_cuda_source_build_against_the_cuda_13_headers(tmp_path):
    home = _cuda_home()
    r, out = _pip_wheel(tmp_path, {"MONARCH_CY_GPU_PLATFORM": "cuda", "CUDA_HOME": str(home)})
    _check_built(r, out, "MCY_VENDOR_CUDA", home / "include")


def test_rocm_source_build_against_debians_hip_headers(tmp_path):
    root = _hip_root()
    r, out = _pip_wheel(tmp_path, {"MONARCH_CY_GPU_PLATFORM": "rocm", "ROCM_PATH": str(root)})
    _check_built(r, out, "MCY_VENDOR_HIP", root / "include")


def test_a_cuda_header_that_disagrees_stops_the_build(tmp_path):
    home = _cuda_home()
    bad = _mutated(home / "include", tmp_path / "cuda" / "include", "driver_types.h",
                   "cudaErrorNotReady                     =     600,",
                   "cudaErrorNotReady                     =     601,")
    r, _ = _pip_wheel(tmp_path, {"MONARCH_CY_GPU_PLATFORM": "cuda",
                                 "CUDA_HOME": str(bad.parent)})
    assert r.returncode != 0, "a disagreeing vendor header built"
    assert "MCY_ERROR_NOT_READY differs from the vendor" in r.stdout + r.stderr


def test_a_hip_header_that_disagrees_stops_the_build(tmp_path):
    root = _hip_root()
    bad = _mutated(root / "include" / "hip", tmp_path / "rocm" / "include" / "hip",
                   "hip_runtime_api.h", "hipErrorNotReady = 600,", "hipErrorNotReady = 601,")
    r, _ = _pip_wheel(tmp_path, {"MONARCH_CY_GPU_PLATFORM": "rocm",
                                 "ROCM_PATH": str(bad.parent.parent)})
    assert r.returncode != 0, "a disagreeing vendor header built"
    assert "MCY_ERROR_NOT_READY differs from the vendor" in r.stdout + r.stderr


@pytest.mark.parametrize("platform,var", [("cuda", "CUDA_HOME"), ("rocm", "ROCM_PATH")])
def test_missing_vendor_headers_are_named_before_compiling(platform, var, tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    r, _ = _pip_wheel(tmp_path, {"MONARCH_CY_GPU_PLATFORM": platform, var: str(empty)})
    log = r.stdout + r.stderr
    assert r.returncode != 0
    assert f"MONARCH_CY_GPU_PLATFORM={platform}: no " in log and f"set {var}" in log, log[-3000:]
    assert not _compile_lines(log), "it compiled before saying the headers are missing"
