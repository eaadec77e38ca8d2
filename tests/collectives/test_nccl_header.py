"""Proof of ``mcy_nccl_names.h`` against the real ``nccl.h`` (the nvidia-nccl-cu13 wheel).

(a) vendor mode (``-DMCY_VENDOR_NCCL``) compiles with ``gcc -Werror``: every
    function-pointer type equals the real prototype, every MCY_NCCL_* value the
    real enum value, the config prefix the real struct's leading fields;
(b) a copy with one prototype (resp. one enum value) corrupted fails with that
    assert's message, and still compiles in default mode: the check bites;
(c) the header's function list equals the built shim's ``function_names()``.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "monarch_cy" / "include" / "mcy_nccl_names.h"
INSTALL = f"{sys.executable} -m pip install nvidia-nccl-cu13 nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88"
# nccl.h includes cuda_fp16.h/cuda_bf16.h, which need CCCL's <nv/target> (not in
# the wheels) and declare nothing the nccl* prototypes use: skip them by guard.
SKIP_FP = ["-D__CUDA_FP16_H__", "-D__CUDA_BF16_H__"]
SRC = '#include "mcy_nccl_names.h"\nint main(void) { return (int)MCY_NCCL_NFUNCS; }\n'


def _dirs():
    spec = importlib.util.find_spec("nvidia")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        nccl, cuda = Path(loc) / "nccl" / "include", Path(loc) / "cu13" / "include"
        if (nccl / "nccl.h").is_file() and (cuda / "cuda_runtime.h").is_file():
            return nccl, cuda
    return None


@pytest.fixture(scope="module")
def inc():
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    d = _dirs()
    if d is None:
        pytest.skip(f"no nccl.h + CUDA headers: {INSTALL}")
    return d


def _compile(tmp_path: Path, header_dir: Path, inc, vendor: bool) -> subprocess.CompletedProcess:
    src = tmp_path / "check.c"
    src.write_text(SRC)
    args = ["gcc", "-std=c11", "-Werror", "-Wall", "-c", str(src), "-o", str(tmp_path / "check.o"), f"-I{header_dir}"]
    if vendor:
        args += ["-DMCY_VENDOR_NCCL", f"-I{inc[0]}", f"-I{inc[1]}", *SKIP_FP]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def test_vendor_mode_compiles(tmp_path, inc):
    r = _compile(tmp_path, HEADER.parent, inc, vendor=True)
    assert r.returncode == 0, r.stderr


def test_default_mode_compiles_without_vendor_headers(tmp_path, inc):
    r = _compile(tmp_path, HEADER.parent, inc, vendor=False)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "old,new,message",
    [
        ("X(Send, 1, ncclResult_t, (const void *sendbuff, size_t count,",
         "X(Send, 1, ncclResult_t, (const void *sendbuff, int count,", "prototype of ncclSend differs"),
        ("#define MCY_NCCL_AVG 4", "#define MCY_NCCL_AVG 5", "MCY_NCCL_AVG differs"),
        ("    int blocking;\n} mcy_nccl_config;", "    int cgaClusterSize;\n    int blocking;\n} mcy_nccl_config;",
         "offsetof(mcy_nccl_config, blocking) differs"),
    ],
)
def test_corrupted_copy_fails_in_vendor_mode_only(tmp_path, inc, old, new, message):
    text = HEADER.read_text()
    assert old in text
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / HEADER.name).write_text(text.replace(old, new))
    r = _compile(tmp_path, bad, inc, vendor=True)
    assert r.returncode != 0 and message in r.stderr, r.stderr[-2000:]
    assert _compile(tmp_path, bad, inc, vendor=False).returncode == 0


def test_function_list_matches_the_shim():
    shim = pytest.importorskip("monarch_cy._nccl_shim", reason="extension not built")
    names = re.findall(r"^\s+X\((\w+), ([01]),", HEADER.read_text(), re.M)
    assert [(f"nccl{n}", r == "1") for n, r in names] == shim.function_names()
