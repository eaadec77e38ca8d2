"""Vendor wheels the ABI proofs read: each release installed once into a throwaway folder.

The proofs of ``_platform_tables.py`` and the alias headers need one vendor
release's real headers or bindings at a time (CUDA 12.0's headers, ROCm 7.2's
``hip-python``...).  None of them is a dependency of monarch_cy or of the test
environment: each set of pinned wheels is installed with
``pip install --no-deps --target`` into its own folder under
``$MONARCH_CY_VENDOR_WHEEL_CACHE`` (default ``/var/tmp/monarch_cy-vendor-wheels``),
never on the test process's path; the proofs read files from it or run a
subprocess with it on ``PYTHONPATH``.  The folder is kept between runs (a stamp
records the pins; changed pins reinstall), so a warm run downloads nothing.

Installs are serialized by a lock file, so parallel test processes share one
download.  ``MONARCH_CY_VENDOR_WHEELS=0`` skips the proofs that need a
download; ``require`` turns a failed download into a test failure instead of a
skip (what CI on a networked machine should use to keep the proof honest).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from monarch_cy import _config

INSTALL_TIMEOUT_S = 600


def cache_root() -> Path:
    return Path(_config.get("MONARCH_CY_VENDOR_WHEEL_CACHE"))


def _mode() -> str:
    return _config.get("MONARCH_CY_VENDOR_WHEELS")


def installed(name: str, requirements: list[str], keep: tuple[str, ...] = ()) -> Path:
    """The folder holding ``requirements`` (pinned, installed without dependencies).

    ``keep``: glob patterns, relative to the folder, of what the proofs read;
    when given, every other file is deleted after installing (hip-python's
    BLAS/FFT/solver bindings are most of its 300 MB and no proof reads them).
    Skips the calling test (or fails it, under ``MONARCH_CY_VENDOR_WHEELS=require``)
    when the wheels cannot be had.
    """
    mode = _mode()
    if mode == "0":
        pytest.skip("MONARCH_CY_VENDOR_WHEELS=0: vendor-wheel proofs are switched off")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / name
    stamp = target / ".monarch_cy-pins.json"
    want = {"requirements": sorted(requirements), "keep": list(keep),
            "python": f"{sys.version_info[0]}.{sys.version_info[1]}"}
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and json.loads(stamp.read_text()) == want:
            return target
        shutil.rmtree(target, ignore_errors=True)
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "--no-deps", "--no-compile", "--only-binary", ":all:", "--target", str(target),
               *requirements]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            r = None
        if r is None or r.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            why = "timed out" if r is None else (r.stderr.strip().splitlines() or ["failed"])[-1]
            message = f"cannot install {' '.join(requirements)} ({why}): run `{' '.join(cmd)}`"
            if mode == "require":
                pytest.fail(message)
            pytest.skip(message)
        if keep:
            _prune(target, keep)
        stamp.write_text(json.dumps(want))
    return target


def _prune(target: Path, keep: tuple[str, ...]) -> None:
    kept = {p.resolve() for pattern in keep for p in target.glob(pattern)}
    for path in sorted(target.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_file() and path.resolve() not in kept and ".dist-info" not in str(path):
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


# The header wheels of each CUDA release a table claims as a proof (see
# _platform_tables.Proof): requirements, then include folders (the first with -I,
# the rest with -idirafter: CUDA 12 keeps crt/host_defines.h in the nvcc wheel).
CUDA_WHEELS = {
    "13.0.96": (["nvidia-cuda-runtime==13.0.96", "nvidia-cuda-crt==13.0.88"], ["nvidia/cu13/include"]),
    "13.5.37": (["nvidia-cuda-runtime==13.5.37", "nvidia-cuda-crt==13.5.37"], ["nvidia/cu13/include"]),
    "12.0.146": (["nvidia-cuda-runtime-cu12==12.0.146", "nvidia-cuda-nvcc-cu12==12.0.140"],
                 ["nvidia/cuda_runtime/include", "nvidia/cuda_nvcc/include"]),
    "12.9.79": (["nvidia-cuda-runtime-cu12==12.9.79", "nvidia-cuda-nvcc-cu12==12.9.86"],
                ["nvidia/cuda_runtime/include", "nvidia/cuda_nvcc/include"]),
}
CUDA_KEEP = ("nvidia/cu13/include/**/*", "nvidia/cuda_runtime/include/**/*",
             "nvidia/cuda_nvcc/include/crt/*")


def cuda_headers(version: str) -> list[Path]:
    """Include folders of CUDA release ``version``'s header wheels (a key of
    :data:`CUDA_WHEELS`), installed on first use: the first is the main one."""
    reqs, incs = CUDA_WHEELS[version]
    root = installed(f"cuda-headers-{version}", reqs, CUDA_KEEP)
    return [root / i for i in incs]
