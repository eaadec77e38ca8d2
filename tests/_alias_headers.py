"""What our alias headers declare, read from their text, for the ABI proofs.

``monarch_cy/include/mcy_cuda_names.h`` and ``mcy_nccl_names.h`` are the one
statement of the functions the shims bind and the constants both vendors share;
the proofs compare these lists with each vendor release, so they are parsed
here once rather than copied into the tests.  (The C proofs compile the headers
themselves; ``test_function_list_matches_extension`` checks these parses
against the preprocessor's expansion and the built shim.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

INCLUDE = Path(__file__).resolve().parents[1] / "monarch_cy" / "include"
CUDA_NAMES = INCLUDE / "mcy_cuda_names.h"
NCCL_NAMES = INCLUDE / "mcy_nccl_names.h"


@dataclass(frozen=True)
class Function:
    name: str          # CUDA name without prefix ("Malloc"), or NCCL's without "nccl"
    symbol: str        # the HIP (or nccl*) symbol it binds on ROCm
    ret: str
    params: str        # the parameter list as written, names included
    required: bool = True
    cuda_symbol: str = ""  # what it binds on CUDA


def _block(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


def defines(text: str) -> dict[str, int]:
    """``#define MCY_NAME <integer>`` of a header."""
    out = {}
    for name, value in re.findall(r"^#define\s+(MCY_\w+)\s+\(?(-?(?:0x)?[0-9a-fA-F]+)\)?\s*$", text, re.M):
        out[name] = int(value, 0)
    return out


def runtime_functions(text: str) -> list[Function]:
    block = _block(text, "#define MCY_RUNTIME_FUNCTIONS", "#define MCY_DECLARE_TYPE")
    return [Function(n, h, r.strip(), p, cuda_symbol="cuda" + n) for n, h, r, p in
            re.findall(r"^\s*X\((\w+), (\w+), ([^,]+?), \(([^)]*)\)\)", block, re.M)]


def driver_functions(text: str) -> list[Function]:
    block = _block(text, "#define MCY_DRIVER_FUNCTIONS", "#define MCY_DECLARE_DRV_TYPE")
    return [Function(n, h, "mcy_drv_status_t", p, required=False, cuda_symbol=cu) for n, cu, h, p in
            re.findall(r"^\s*X\((\w+), (\w+), (\w+), \(([^)]*)\)\)", block, re.M)]


def shared_constants(text: str) -> list[tuple[str, str, str]]:
    """``(MCY name, CUDA name, HIP name)`` of every ``MCY_SAME`` check."""
    return re.findall(r"^MCY_SAME\((MCY_\w+), MCY_V\((\w+), (\w+)\)\)", text, re.M)


def hip_aliases(text: str) -> dict[str, str]:
    """Our type names -> what they are in vendor-HIP mode (the header's alias block)."""
    block = _block(text, "#elif defined(MCY_VENDOR_HIP)", "#else")
    out = dict((alias, target) for target, alias in
               re.findall(r"^typedef\s+(.+?)\s+(\w+);", block, re.M))
    out.update(re.findall(r"^#define\s+(MCY_\w+_T)\s+(.+?)\s*$", block, re.M))
    return out


def nccl_functions(text: str) -> list[Function]:
    block = _block(text, "#define MCY_NCCL_FUNCTIONS", "#define MCY_NCCL_DECLARE_TYPE")
    return [Function(n, "nccl" + n, r.strip(), p, required=req == "1") for n, req, r, p in
            re.findall(r"^\s*X\((\w+), ([01]), ([^,]+?), \(([^)]*)\)\)", block, re.M)]


def nccl_checks(text: str) -> list[tuple[str, str]]:
    """``(ours, vendor's)`` expression pairs of every ``MCY_NCCL_SAME`` check."""
    return [(a.strip(), b.strip()) for a, b in
            re.findall(r"^MCY_NCCL_SAME\(((?:[^(),]|\([^()]*\))+),\s*((?:[^(),]|\([^()]*\))+)\)",
                       text, re.M)]


def nccl_aliases(text: str) -> dict[str, str]:
    block = _block(text, "#if defined(MCY_VENDOR_NCCL)", "#else")
    return dict((alias, target) for target, alias in
                re.findall(r"^typedef\s+(.+?)\s+(\w+);", block, re.M))
