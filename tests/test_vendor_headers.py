"""Proof of ``mcy_cuda_names.h`` and ``_platform_tables.py`` against the real vendor headers.

For every CUDA release a table claims as a proof (12.0, 12.9, 13.0, 13.5: the
``nvidia-cuda-runtime`` header wheels, installed once into a throwaway folder by
``tests/_vendor_wheels.py``), the machine's own CUDA 12/13 toolkit
(``$CUDA_HOME``, ``/usr/local/cuda``) and HIP headers (``$ROCM_PATH``,
``/opt/rocm``, Debian's ``libamdhip64-dev`` 5.2, the ``hip5`` proof), with
``gcc -Werror`` (ROCm 6 and 7: ``tests/test_hip_python_proof.py``):

(a) ``proto_check.c`` compiles in vendor mode: every function-pointer type in
    the X-macro list equals the vendor's prototype, and every MCY_* shared
    constant equals the vendor's value (the header's static asserts);
(b) the same compile against a copy of the header with one prototype (resp.
    one shared constant) corrupted FAILS with that assert's message, while the
    corrupted copy still compiles in default mode: the check bites;
(c) ``layout_dump.c`` prints every value the matching ``PlatformTable``
    declares (attribute numbers, IPC lazy flag, struct sizes, field offsets and
    widths, memory-type numbering, no-device statuses, versioned symbol names,
    optional driver functions), compared field by field with the table
    ``table_for`` picks for the headers' version -- for a proof's headers, the
    claiming table;
(d) ``abi_dump.c`` prints the same sizes and function list in default mode (what
    the shim is built with) as in vendor mode.

Missing headers skip with the command that installs them.  Independently of any
vendor header, the header's function list must equal the compiled extension's
``_hip_shim.function_names()`` (skipped when the extension is not built).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import _alias_headers
import _vendor_wheels

from monarch_cy import _platform_tables as tables

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = ROOT / "monarch_cy" / "include"
HEADER = INCLUDE / "mcy_cuda_names.h"
SRC = Path(__file__).resolve().parent / "vendor_headers"

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




@dataclass(frozen=True)
class HeaderSet:
    """One vendor release's headers: from a proof's wheels (installed on first use) or the machine."""

    platform: str
    label: str
    proof: tables.Proof | None = None
    table: tables.PlatformTable | None = None
    system_dir: Path | None = None

    def dirs(self) -> list[Path]:
        if self.system_dir is not None:
            return [self.system_dir]
        return _vendor_wheels.cuda_headers(self.proof.version)

    def flags(self) -> list[str]:
        macros = ["-DMCY_VENDOR_CUDA"] if self.platform == "cuda" else [
            "-DMCY_VENDOR_HIP", "-D__HIP_PLATFORM_AMD__"]
        first, *rest = self.dirs()
        return macros + ["-I", str(first)] + [f for d in rest for f in ("-idirafter", str(d))]


def _system_cuda() -> list[HeaderSet]:
    """The machine's own CUDA 12/13 toolkit headers, if any (compared by their version)."""
    found = [(f"${e}", Path(os.environ[e]) / "include") for e in ("CUDA_HOME", "CUDA_PATH")
             if os.environ.get(e)] + [("/usr/local/cuda", Path("/usr/local/cuda/include"))]
    out, seen = [], set()
    for label, d in found:
        api = d / "cuda_runtime_api.h"
        if not api.is_file() or not (d / "crt" / "host_defines.h").is_file() or d.resolve() in seen:
            continue
        m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", api.read_text(errors="replace"))
        if m and int(m.group(1)) // 1000 in (12, 13):
            seen.add(d.resolve())
            out.append(HeaderSet("cuda", label, system_dir=d))
    return out


def _system_hip() -> list[HeaderSet]:
    found = []
    if os.environ.get("ROCM_PATH"):
        found.append(("$ROCM_PATH", Path(os.environ["ROCM_PATH"]) / "include"))
    found += [("/opt/rocm", Path("/opt/rocm/include")), ("system", Path("/usr/include"))]
    out, seen = [], set()
    for label, d in found:
        if (d / "hip" / "hip_runtime_api.h").is_file() and d.resolve() not in seen:
            seen.add(d.resolve())
            out.append(HeaderSet("rocm", label, system_dir=d))
    return out


def _targets():
    params = []
    for t in tables.TABLES:
        for p in t.proofs:
            if p.tool.startswith("nvidia-cuda-runtime"):
                params.append(pytest.param(HeaderSet("cuda", str(p), p, t), id=f"cuda-{p.version}"))
    params += [pytest.param(h, id=f"cuda-{h.label.strip('$/').replace('/', '-')}") for h in _system_cuda()]
    hip = _system_hip()
    params += [pytest.param(h, id=f"rocm-{h.label.strip('$/').replace('/', '-')}") for h in hip]
    if not hip:
        params.append(pytest.param(None, id="rocm", marks=pytest.mark.skip(
            reason=f"no hip/hip_runtime_api.h found: {HIP_INSTALL}")))
    return params


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


@pytest.mark.parametrize("headers", _targets())
def test_prototypes_and_shared_constants_match(headers, tmp_path):
    """(a) Every X-macro prototype and MCY_* constant equals the vendor's (gcc -Werror)."""
    r, _ = _compile(tmp_path, "proto_check.c", headers.flags(), link=False)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("headers", _targets())
@pytest.mark.parametrize("old,new,message", [
    ("X(Malloc, hipMalloc, cudaError_t, (void **devPtr, size_t size))",
     "X(Malloc, hipMalloc, cudaError_t, (void **devPtr, int size))",
     "prototype of {Malloc} differs from mcy_Malloc_t"),
    ("#define MCY_ERROR_NOT_READY 600", "#define MCY_ERROR_NOT_READY 601",
     "MCY_ERROR_NOT_READY differs from the vendor"),
], ids=["wrong-prototype", "wrong-constant"])
def test_corrupted_header_fails_to_compile(headers, old, new, message, tmp_path):
    """(b) Negative control: one corrupted entry makes the vendor-mode compile fail."""
    mutated = _mutated_include(tmp_path, old, new)
    r, _ = _compile(tmp_path, "proto_check.c", [], include=mutated, link=False)
    assert r.returncode == 0, f"the corruption itself is not valid C:\n{r.stderr}"
    r, _ = _compile(tmp_path, "proto_check.c", headers.flags(),
                    include=mutated, link=False)
    assert r.returncode != 0, "a wrong declaration compiled against the real headers"
    expect = message.format(Malloc="cudaMalloc" if headers.platform == "cuda" else "hipMalloc")
    assert expect in r.stderr, r.stderr


@pytest.mark.parametrize("headers", _targets())
def test_platform_table_matches_headers(headers, tmp_path):
    """(c) Every vendor-specific value of the table equals the real header's."""
    platform = headers.platform
    dump = _run_json(tmp_path, "layout_dump.c", headers.flags())
    assert dump["platform"] == platform
    # The table the loader picks for a runtime of this version is the one compared;
    # headers a table claims as its proof must be that release and pick that table.
    table = tables.table_for(platform, dump["header_version"])
    release = "%d.%d" % tables.release_of(platform, dump["header_version"])
    if headers.proof is not None:
        assert (table, release) == (headers.table, headers.proof.release)
    elif platform == "rocm" and release.startswith("5."):
        assert any(p.release == release for p in table.proofs), (
            f"HIP {release} headers: {table.name} claims no proof for this release")

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

    # The optional driver functions the release declares: on CUDA (a) asserts every
    # prototype against cuda.h; on HIP, the ones the runtime header declares.
    api = (headers.dirs()[0] / "hip" / "hip_runtime_api.h").read_text() if platform == "rocm" else ""
    declared = {f.name for f in _alias_headers.driver_functions(HEADER.read_text())
                if platform == "cuda" or re.search(rf"\b{f.symbol}\s*\(", api)}
    assert set(table.driver_functions) == declared


@pytest.mark.parametrize("headers", _targets())
def test_default_abi_equals_vendor_abi(headers, tmp_path):
    """(d) Default mode (the shim's build) lays out everything as the vendor does."""
    (tmp_path / "default").mkdir()
    (tmp_path / "vendor").mkdir()
    default = _run_json(tmp_path / "default", "abi_dump.c", [])
    vendor = _run_json(tmp_path / "vendor", "abi_dump.c", headers.flags())
    assert default == vendor
    assert default["MCY_RT_NFUNCS"] == len(default["functions"])
    assert default["sizeof_mcy_rt_table"] == default["MCY_RT_NFUNCS"] * default["sizeof_void_p"]


def test_function_list_matches_extension(tmp_path):
    """The header's X-macro list, in order, is what the built extension binds."""
    dump = _run_json(tmp_path, "abi_dump.c", [])
    listed = dump["functions"]
    # Cross-check the preprocessor against the text parse the proofs use.
    text = HEADER.read_text()
    assert [[f.cuda_symbol, f.symbol] for f in _alias_headers.runtime_functions(text)] == listed
    assert [[f.cuda_symbol, f.symbol] for f in _alias_headers.driver_functions(text)] == \
        dump["driver_functions"]
    try:
        from monarch_cy import _hip_shim
    except ImportError as e:
        pytest.skip(f"monarch_cy._hip_shim is not built ({e}): run "
                    "`python setup.py build_ext --inplace`")
    assert [list(p) for p in _hip_shim.function_names()] == listed
    assert [list(p) for p in _hip_shim.driver_function_names()] == dump["driver_functions"]
