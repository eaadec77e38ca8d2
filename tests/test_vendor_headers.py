"""Proof of ``mcy_cuda_names.h`` and ``_platform_tables.py`` against the real vendor headers.

For each platform whose real headers are found (CUDA 13: ``$CUDA_HOME``,
``/usr/local/cuda`` or the ``nvidia-cuda-runtime`` + ``nvidia-cuda-crt`` wheels
in this interpreter; HIP: ``$ROCM_PATH``, ``/opt/rocm`` or Debian's
``libamdhip64-dev``), with ``gcc -Werror``:

(a) ``proto_check.c`` compiles in vendor mode: every function-pointer type in
    the X-macro list equals the vendor's prototype, and every MCY_* shared
    constant equals the vendor's value (the header's static asserts);
(b) the same compile against a copy of the header with one prototype (resp.
    one shared constant) corrupted FAILS with that assert's message, while the
    corrupted copy still compiles in default mode: the check bites;
(c) ``layout_dump.c`` prints every value the matching ``PlatformTable``
    declares (attribute numbers, IPC lazy flag, struct sizes, field offsets and
    widths, memory-type numbering, no-device statuses, versioned symbol names),
    compared field by field with ``CUDA13`` / ``HIP5``;
(d) ``abi_dump.c`` prints the same sizes and function list in default mode (what
    the shim is built with) as in vendor mode.

Missing headers skip with the command that installs them.  Independently of any
vendor header, the header's function list must equal the compiled extension's
``_hip_shim.function_names()`` (skipped when the extension is not built).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from monarch_cy import _platform_tables as tables

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = ROOT / "monarch_cy" / "include"
HEADER = INCLUDE / "mcy_cuda_names.h"
SRC = Path(__file__).resolve().parent / "vendor_headers"

CUDA_INSTALL = (
    "install a CUDA 13 toolkit and set CUDA_HOME, or run "
    f"`{sys.executable} -m pip install nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88`"
)
HIP_INSTALL = "run `apt-get install libamdhip64-dev` (Debian), or install ROCm and set ROCM_PATH"

# What each vendor memory type means in our vocabulary (MEMORY_TYPES); the
# numbers themselves come from the headers.
MEMORY_MEANING = {
    "cuda": {
        "cudaMemoryTypeUnregistered": "unregistered",
        "cudaMemoryTypeHost": "host",
        "cudaMemoryTypeDevice": "device",
        "cudaMemoryTypeManaged": "managed",
    },
    "rocm": {
        "hipMemoryTypeHost": "host",
        "hipMemoryTypeDevice": "device",
        "hipMemoryTypeArray": "device",
        "hipMemoryTypeUnified": "managed",
    },
}
# PlatformTable fields whose value is read straight off the headers.
DIRECT_FIELDS = [
    "ipc_lazy_enable_peer_access",
    "attr_compute_capability_major",
    "attr_compute_capability_minor",
    "attr_multiprocessor_count",
    "attr_pci_bus_id",
    "attr_pci_device_id",
    "attr_pci_domain_id",
    "pointer_attrs_size",
    "pointer_type_offset",
    "pointer_device_offset",
    "pointer_devptr_offset",
    "pointer_hostptr_offset",
    "pointer_managed_offset",
    "device_prop_size",
    "prop_name_offset",
    "prop_total_mem_offset",
    "prop_arch_name_offset",
]


def _cuda_dirs() -> tuple[list[tuple[str, Path]], str]:
    """(label, include dir) of every distinct CUDA 13 header set, and why none if empty."""
    found: list[tuple[str, Path]] = []
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            found.append((f"${env}", Path(os.environ[env]) / "include"))
    found.append(("/usr/local/cuda", Path("/usr/local/cuda/include")))
    spec = importlib.util.find_spec("nvidia")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        found.append(("wheel", Path(loc) / "cu13" / "include"))
    out, seen, why = [], set(), "no cuda_runtime_api.h found"
    for label, d in found:
        api = d / "cuda_runtime_api.h"
        if not api.is_file() or d.resolve() in seen:
            continue
        if not (d / "crt" / "host_defines.h").is_file():
            why = f"{d} lacks crt/host_defines.h (the nvidia-cuda-crt wheel)"
            continue
        m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", api.read_text(errors="replace"))
        if not m or int(m.group(1)) // 1000 != 13:
            why = f"{d} holds CUDA {m.group(1) if m else '?'} headers, not CUDA 13"
            continue
        seen.add(d.resolve())
        out.append((label, d))
    return out, why


def _hip_dirs() -> tuple[list[tuple[str, Path]], str]:
    found = []
    if os.environ.get("ROCM_PATH"):
        found.append(("$ROCM_PATH", Path(os.environ["ROCM_PATH"]) / "include"))
    found += [("/opt/rocm", Path("/opt/rocm/include")), ("system", Path("/usr/include"))]
    out, seen = [], set()
    for label, d in found:
        if (d / "hip" / "hip_runtime_api.h").is_file() and d.resolve() not in seen:
            seen.add(d.resolve())
            out.append((label, d))
    return out, "no hip/hip_runtime_api.h found"


def _targets():
    params = []
    for plat, (dirs, why), install in (
        ("cuda", _cuda_dirs(), CUDA_INSTALL),
        ("rocm", _hip_dirs(), HIP_INSTALL),
    ):
        for label, d in dirs:
            params.append(pytest.param(plat, d, id=f"{plat}-{label.strip('$/').replace('/', '-')}"))
        if not dirs:
            params.append(pytest.param(plat, None, id=plat,
                                       marks=pytest.mark.skip(reason=f"{why}: {install}")))
    return params


def _vendor_flags(platform: str, incdir: Path) -> list[str]:
    macros = ["-DMCY_VENDOR_CUDA"] if platform == "cuda" else [
        "-DMCY_VENDOR_HIP", "-D__HIP_PLATFORM_AMD__"]
    return macros + ["-I", str(incdir)]


def _cc() -> str:
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler: run `apt-get install gcc`")
    return cc


def _compile(tmp: Path, source: str, flags: list[str], include: Path = INCLUDE, link=True):
    exe = tmp / (Path(source).stem + ("" if link else ".o"))
    cmd = [_cc(), "-std=gnu11", "-Wall", "-Werror", "-I", str(include), *flags,
           *([] if link else ["-c"]), str(SRC / source), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return r, exe


def _run_json(tmp: Path, source: str, flags: list[str]) -> dict:
    r, exe = _compile(tmp, source, flags)
    assert r.returncode == 0, f"{source} does not compile with {flags}:\n{r.stderr}"
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def _mutated_include(tmp: Path, old: str, new: str) -> Path:
    text = HEADER.read_text()
    assert text.count(old) == 1, f"mutation target {old!r} is not in the header exactly once"
    d = tmp / "mutated"
    d.mkdir(exist_ok=True)
    (d / HEADER.name).write_text(text.replace(old, new))
    return d


@pytest.mark.parametrize("platform,incdir", _targets())
def test_prototypes_and_shared_constants_match(platform, incdir, tmp_path):
    """(a) Every X-macro prototype and MCY_* constant equals the vendor's (gcc -Werror)."""
    r, _ = _compile(tmp_path, "proto_check.c", _vendor_flags(platform, incdir), link=False)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("platform,incdir", _targets())
@pytest.mark.parametrize("old,new,message", [
    ("X(Malloc, hipMalloc, cudaError_t, (void **devPtr, size_t size))",
     "X(Malloc, hipMalloc, cudaError_t, (void **devPtr, int size))",
     "prototype of {Malloc} differs from mcy_Malloc_t"),
    ("#define MCY_ERROR_NOT_READY 600", "#define MCY_ERROR_NOT_READY 601",
     "MCY_ERROR_NOT_READY differs from the vendor"),
], ids=["wrong-prototype", "wrong-constant"])
def test_corrupted_header_fails_to_compile(platform, incdir, old, new, message, tmp_path):
    """(b) Negative control: one corrupted entry makes the vendor-mode compile fail."""
    mutated = _mutated_include(tmp_path, old, new)
    r, _ = _compile(tmp_path, "proto_check.c", [], include=mutated, link=False)
    assert r.returncode == 0, f"the corruption itself is not valid C:\n{r.stderr}"
    r, _ = _compile(tmp_path, "proto_check.c", _vendor_flags(platform, incdir),
                    include=mutated, link=False)
    assert r.returncode != 0, "a wrong declaration compiled against the real headers"
    expect = message.format(Malloc="cudaMalloc" if platform == "cuda" else "hipMalloc")
    assert expect in r.stderr, r.stderr


@pytest.mark.parametrize("platform,incdir", _targets())
def test_platform_table_matches_headers(platform, incdir, tmp_path):
    """(c) Every vendor-specific value of the table equals the real header's."""
    dump = _run_json(tmp_path, "layout_dump.c", _vendor_flags(platform, incdir))
    assert dump["platform"] == platform
    # The table the loader picks for a runtime of this version is the one compared.
    table = tables.table_for(platform, dump["header_version"])
    if platform == "cuda":
        assert table is tables.CUDA13
    elif dump["header_version"] // 10_000_000 == 5:
        assert table is tables.HIP5

    mismatches = {f: (getattr(table, f), dump[f]) for f in DIRECT_FIELDS
                  if getattr(table, f) != dump[f]}
    assert not mismatches, f"{table.name}: field: (ours, vendor's) = {mismatches}"

    vendor_memory = {dump["memory_types"][vname]: ours
                     for vname, ours in MEMORY_MEANING[platform].items()}
    assert dict(table.memory_type_names) == vendor_memory
    assert set(table.memory_type_names.values()) <= set(tables.MEMORY_TYPES)
    assert table.no_device_statuses == frozenset(dump["no_device_statuses"].values())

    # A name the vendor's macros rename (_v2, R0600) must head symbol_alternatives;
    # one they leave alone needs no alternative.
    for short, (declared, resolved) in dump["symbols"].items():
        alternatives = tuple(table.symbol_alternatives.get(short, ()))
        want = (resolved,) if resolved != declared else ()
        assert alternatives[:1] == want, f"{declared}: the header resolves it to {resolved}"

    # The shim reads an int at the type/device/managed offsets, a pointer at the
    # pointer offsets, a size_t at totalGlobalMem, <= 256 chars of the names.
    w = dump["widths"]
    assert (w["pointer_type"], w["pointer_device"], w.get("pointer_managed", 4)) == (4, 4, 4)
    assert (w["pointer_devptr"], w["pointer_hostptr"], w["prop_total_mem"]) == (8, 8, 8)
    assert w["prop_name"] == 256 and w.get("prop_arch_name", 256) == 256
    assert table.device_prop_size <= tables.DEVICE_PROP_BUFFER_SIZE
    assert table.pointer_attrs_size <= tables.POINTER_ATTRS_BUFFER_SIZE


@pytest.mark.parametrize("platform,incdir", _targets())
def test_default_abi_equals_vendor_abi(platform, incdir, tmp_path):
    """(d) Default mode (the shim's build) lays out everything as the vendor does."""
    (tmp_path / "default").mkdir()
    (tmp_path / "vendor").mkdir()
    default = _run_json(tmp_path / "default", "abi_dump.c", [])
    vendor = _run_json(tmp_path / "vendor", "abi_dump.c", _vendor_flags(platform, incdir))
    assert default == vendor
    assert default["MCY_RT_NFUNCS"] == len(default["functions"])
    assert default["sizeof_mcy_rt_table"] == default["MCY_RT_NFUNCS"] * default["sizeof_void_p"]


def test_function_list_matches_extension(tmp_path):
    """The header's X-macro list, in order, is what the built extension binds."""
    dump = _run_json(tmp_path, "abi_dump.c", [])
    listed = dump["functions"]
    # Cross-check the preprocessor against the header text itself.
    text = HEADER.read_text()
    runtime_block = text[text.index("#define MCY_RUNTIME_FUNCTIONS"):text.index("#define MCY_DECLARE_TYPE")]
    parsed = re.findall(r"^\s*X\((\w+), (\w+),", runtime_block, re.M)
    assert [["cuda" + c, h] for c, h in parsed] == listed
    driver_block = text[text.index("#define MCY_DRIVER_FUNCTIONS"):text.index("#define MCY_DECLARE_DRV_TYPE")]
    parsed_drv = re.findall(r"^\s*X\(\w+, (\w+), (\w+),", driver_block, re.M)
    assert [[c, h] for c, h in parsed_drv] == dump["driver_functions"]
    try:
        from monarch_cy import _hip_shim
    except ImportError as e:
        pytest.skip(f"monarch_cy._hip_shim is not built ({e}): run "
                    "`python setup.py build_ext --inplace`")
    assert [list(p) for p in _hip_shim.function_names()] == listed
    assert [list(p) for p in _hip_shim.driver_function_names()] == dump["driver_functions"]
