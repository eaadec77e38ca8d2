"""Build script: the Cython extensions of monarch_cy.

The default build needs no GPU toolkit: the CUDA-name alias header
(``monarch_cy/include/mcy_cuda_names.h``) declares everything the shim uses.

``MONARCH_CY_GPU_PLATFORM=cuda`` or ``=rocm`` at build time compiles the alias
header against that platform's real headers instead (``CUDA_HOME`` or
``ROCM_PATH`` say where they are), so that a mismatch between our declarations
and the vendor's stops the build.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
INCLUDE = str(HERE / "monarch_cy" / "include")

# Every Cython module of the package, by dotted name.
CYTHON_MODULES = [
    "monarch_cy._hip_shim",
    "monarch_cy._hostmem",
    "monarch_cy._leases",
    "monarch_cy._rdma",
    "monarch_cy._nccl_shim",
    "monarch_cy._transport._unixio",
    "monarch_cy._transport._fanout",
]


def _platform_flags() -> tuple[list[str], list[tuple[str, str | None]]]:
    """Include dirs and macros for MONARCH_CY_GPU_PLATFORM at build time."""
    platform = os.environ.get("MONARCH_CY_GPU_PLATFORM", "").strip().lower()
    if platform in ("", "none", "auto"):
        return [], []
    if platform == "cuda":
        home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
        inc = os.path.join(home, "include")
        if not os.path.exists(os.path.join(inc, "cuda_runtime_api.h")):
            raise SystemExit(
                f"MONARCH_CY_GPU_PLATFORM=cuda: no cuda_runtime_api.h under {inc!r}; "
                "set CUDA_HOME to the CUDA toolkit"
            )
        return [inc], [("MCY_VENDOR_CUDA", "1")]
    if platform == "rocm":
        # An explicit ROCM_PATH is the only place looked: falling back to another
        # ROCm's headers would check the build against the wrong release.
        home = os.environ.get("ROCM_PATH")
        candidates = ([os.path.join(home, "include")] if home else
                      ["/opt/rocm/include", "/usr/include"])
        for inc in candidates:
            if os.path.exists(os.path.join(inc, "hip", "hip_runtime_api.h")):
                return [inc], [("MCY_VENDOR_HIP", "1"), ("__HIP_PLATFORM_AMD__", "1")]
        raise SystemExit(
            f"MONARCH_CY_GPU_PLATFORM=rocm: no hip/hip_runtime_api.h under {candidates!r}; "
            "set ROCM_PATH to the ROCm installation (the folder holding include/hip)"
        )
    raise SystemExit(
        f"MONARCH_CY_GPU_PLATFORM={platform!r} is not a platform; use cuda, rocm or none"
    )


def _extensions() -> list[Extension]:
    vendor_includes, macros = _platform_flags()
    exts = []
    for name in CYTHON_MODULES:
        source = name.replace(".", "/") + ".pyx"
        exts.append(
            Extension(
                name,
                [source],
                include_dirs=[INCLUDE, *vendor_includes],
                define_macros=macros,
                extra_compile_args=["-O2", "-Werror=incompatible-pointer-types"],
            )
        )
    return cythonize(
        exts,
        language_level=3,
        compiler_directives={"embedsignature": True, "boundscheck": False, "wraparound": False},
    )


def _check_platform() -> None:
    """Refuse, in words, what the wheels and the code do not support (not a compile error)."""
    if not sys.platform.startswith("linux"):
        raise SystemExit(
            f"monarch_cy runs on Linux only (this is {sys.platform!r}): its transport uses "
            "Linux-only facilities (pidfds, AF_UNIX seqpacket sockets, /proc)"
        )


_check_platform()
setup(ext_modules=_extensions())
