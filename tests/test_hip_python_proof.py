"""Proof of the ROCm tables and alias headers against AMD's ``hip-python``, per release.

For every ``hip-python`` release a table in ``monarch_cy/_platform_tables.py``
claims as a proof (ROCm 6.2, 6.4, 7.0, 7.2 today), the wheel is installed into a
throwaway folder (``tests/_vendor_wheels.py``, cached) and checked:

(a) the release is the one claimed, and ``table_for`` picks the claiming table
    for its HIP version;
(b) every value of the table: device-attribute numbers, the IPC lazy flag,
    struct sizes, the offset and width of every field the shim reads, the
    memory-type numbering (every member, so a new kind cannot slip through as
    "unregistered"), no-device statuses, which optional driver functions exist;
(c) every shared constant of ``mcy_cuda_names.h`` (``MCY_SAME``) and the IPC
    handle size;
(d) every runtime and driver prototype of the X-macro lists, type by type;
(e) the symbol each function binds to (``hipGetDevicePropertiesR0600``) heads
    ``symbol_alternatives`` exactly where the release renames it;
(f) RCCL: every ``MCY_NCCL_SAME`` value, the unique-id size, the config
    prefix's offsets, and the NCCL prototypes.

Each check returns its mismatches; the negative controls feed it one wrong
value and see the mismatch named.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import subprocess
from types import MappingProxyType

import pytest

import _alias_headers as hdr
import _hip_python_bindings as hp
from monarch_cy import _platform_tables as tables

CUDA_TEXT = hdr.CUDA_NAMES.read_text()
NCCL_TEXT = hdr.NCCL_NAMES.read_text()
HIP_PYTHON = [(t, p) for t in tables.TABLES for p in t.proofs if p.tool == "hip-python"]
NEWEST = HIP_PYTHON[-1][1].version

# Table field -> the HIP name of its value.
VALUE_FIELDS = {
    "ipc_lazy_enable_peer_access": "hipIpcMemLazyEnablePeerAccess",
    "attr_compute_capability_major": "hipDeviceAttributeComputeCapabilityMajor",
    "attr_compute_capability_minor": "hipDeviceAttributeComputeCapabilityMinor",
    "attr_multiprocessor_count": "hipDeviceAttributeMultiprocessorCount",
    "attr_pci_bus_id": "hipDeviceAttributePciBusId",
    "attr_pci_device_id": "hipDeviceAttributePciDeviceId",
    "attr_pci_domain_id": "hipDeviceAttributePciDomainID",
}
# Table field -> (struct, field, width the shim reads there).
OFFSET_FIELDS = {
    "pointer_type_offset": ("hipPointerAttribute_t", "type", 4),
    "pointer_device_offset": ("hipPointerAttribute_t", "device", 4),
    "pointer_devptr_offset": ("hipPointerAttribute_t", "devicePointer", 8),
    "pointer_hostptr_offset": ("hipPointerAttribute_t", "hostPointer", 8),
    "pointer_managed_offset": ("hipPointerAttribute_t", "isManaged", 4),
    "prop_name_offset": ("hipDeviceProp_t", "name", 256),
    "prop_total_mem_offset": ("hipDeviceProp_t", "totalGlobalMem", 8),
    "prop_arch_name_offset": ("hipDeviceProp_t", "gcnArchName", 256),
}
SIZE_FIELDS = {"pointer_attrs_size": "hipPointerAttribute_t", "device_prop_size": "hipDeviceProp_t"}
# What each ROCm 6+ memory type means in our vocabulary (MEMORY_TYPES).
MEMORY_MEANING = {
    "hipMemoryTypeUnregistered": "unregistered", "hipMemoryTypeHost": "host",
    "hipMemoryTypeDevice": "device", "hipMemoryTypeManaged": "managed",
    "hipMemoryTypeArray": "device", "hipMemoryTypeUnified": "managed",
}
NO_DEVICE = ("hipErrorInsufficientDriver", "hipErrorNoDevice")
# RCCL spells some NCCL names its own way (6.x: ncclFp8E4M3); same value required.
RCCL_SPELLINGS = {"ncclFloat8e4m3": ("ncclFp8E4M3",), "ncclFloat8e5m2": ("ncclFp8E5M2",)}
# What the bindings cannot prove, and why that is acceptable.
RCCL_UNPROVABLE = {
    "ncclTimeout": "RCCL has no ncclTimeout result: RESULT_TIMEOUT only ever comes from NCCL",
    "NCCL_API_MAGIC": "a macro hip-python does not bind (RCCL keeps NCCL's 0xcafebeef)",
    "NCCL_SPLIT_NOCOLOR": "a macro hip-python does not bind (RCCL keeps NCCL's -1)",
}
CONFIG_FIELDS = ("size", "magic", "version", "blocking")


def _request() -> dict:
    names = {h for _m, _c, h in hdr.shared_constants(CUDA_TEXT)}
    names |= set(VALUE_FIELDS.values()) | set(NO_DEVICE) | {"hipMemRangeHandleTypeDmaBufFd"}
    for _ours, theirs in hdr.nccl_checks(NCCL_TEXT):
        if theirs.isidentifier():
            names |= {theirs, *RCCL_SPELLINGS.get(theirs, ())}
    structs: dict[str, list[str]] = {"hipIpcMemHandle_st": ["reserved"],
                                     "ncclUniqueId": ["internal"],
                                     "ncclConfig_t": list(CONFIG_FIELDS)}
    for struct, fname, _w in OFFSET_FIELDS.values():
        structs.setdefault(struct, []).append(fname)
    return {"values": sorted(names), "enums": ["hipMemoryType"], "structs": structs}


@functools.lru_cache(maxsize=None)
def _facts(version: str) -> tuple[dict, hp.Declarations]:
    site = hp.install(version)
    return hp.dump(site, _request()), hp.declarations(site)


@pytest.fixture(params=[p.version for _t, p in HIP_PYTHON])
def release(request):
    """(claiming table, dump, declarations) of one hip-python release."""
    table = next(t for t, p in HIP_PYTHON if p.version == request.param)
    dump, decl = _facts(request.param)
    return table, dump, decl


@pytest.fixture
def newest():
    table = next(t for t, p in HIP_PYTHON if p.version == NEWEST)
    return (table, *_facts(NEWEST))


# ------------------------------------------------------------------ the checks

def check_table(table, dump: dict, decl: hp.Declarations) -> list[str]:
    bad = []
    for f, name in VALUE_FIELDS.items():
        if getattr(table, f) != dump["values"][name]:
            bad.append(f"{f}: ours {getattr(table, f)}, {name} = {dump['values'][name]}")
    for f, struct in SIZE_FIELDS.items():
        if getattr(table, f) != dump["structs"][struct]["size"]:
            bad.append(f"{f}: ours {getattr(table, f)}, sizeof({struct}) = "
                       f"{dump['structs'][struct]['size']}")
    for f, (struct, fname, width) in OFFSET_FIELDS.items():
        got = dump["structs"][struct]["offsets"][fname]
        if getattr(table, f) != got:
            bad.append(f"{f}: ours {getattr(table, f)}, offsetof({struct}, {fname}) = {got}")
        declared = hp.field_width(decl.struct_fields[struct][fname], decl)
        if declared != width:
            bad.append(f"{struct}.{fname} is {declared} bytes; the shim reads {width}")
    members = dump["enums"]["hipMemoryType"]
    if set(members) != set(MEMORY_MEANING):
        bad.append(f"hipMemoryType members {sorted(members)} are not {sorted(MEMORY_MEANING)}")
    vendor = {v: MEMORY_MEANING.get(k, "?") for k, v in members.items()}
    if dict(table.memory_type_names) != vendor:
        bad.append(f"memory_type_names: ours {dict(table.memory_type_names)}, vendor's {vendor}")
    statuses = frozenset(dump["values"][n] for n in NO_DEVICE)
    if table.no_device_statuses != statuses:
        bad.append(f"no_device_statuses: ours {set(table.no_device_statuses)}, vendor's {set(statuses)}")
    present = {f.name for f in hdr.driver_functions(CUDA_TEXT) if f.symbol in decl.prototypes}
    if set(table.driver_functions) != present:
        bad.append(f"driver_functions: ours {sorted(table.driver_functions)}, release has {sorted(present)}")
    if table.device_prop_size > tables.DEVICE_PROP_BUFFER_SIZE:
        bad.append("device_prop_size exceeds the shim's buffer")
    return bad


def check_constants(text: str, dump: dict) -> list[str]:
    ours = hdr.defines(text)
    bad = [f"{m} = {ours[m]}, {h} = {dump['values'][h]}"
           for m, _c, h in hdr.shared_constants(text) if ours[m] != dump["values"][h]]
    handle = dump["structs"]["hipIpcMemHandle_st"]["size"]
    if ours["MCY_IPC_HANDLE_SIZE"] != handle:
        bad.append(f"MCY_IPC_HANDLE_SIZE = {ours['MCY_IPC_HANDLE_SIZE']}, sizeof(hipIpcMemHandle_st) = {handle}")
    dma = dump["values"]["hipMemRangeHandleTypeDmaBufFd"]
    if dma is not None and dma != ours["MCY_RANGE_HANDLE_DMA_BUF_FD"]:
        bad.append(f"MCY_RANGE_HANDLE_DMA_BUF_FD = {ours['MCY_RANGE_HANDLE_DMA_BUF_FD']}, "
                   f"hipMemRangeHandleTypeDmaBufFd = {dma}")
    return bad


def _compare(fn: hdr.Function, decl: hp.Declarations, aliases: dict[str, str]) -> str | None:
    if fn.symbol not in decl.prototypes:
        return None if not fn.required else f"{fn.symbol}: not in this release"
    ret, theirs = decl.prototypes[fn.symbol]
    ours = [decl.canon(t, aliases) for t in hp.split_params(fn.params, named=True)]
    theirs = [decl.canon(t) for t in theirs]
    ours_ret, theirs_ret = decl.canon(fn.ret, aliases), decl.canon(ret)
    if (ours_ret, ours) != (theirs_ret, theirs):
        return f"{fn.symbol}: ours {ours_ret} ({', '.join(ours)}), vendor's {theirs_ret} ({', '.join(theirs)})"
    return None


def check_prototypes(text: str, nccl_text: str, decl: hp.Declarations) -> list[str]:
    aliases = hdr.hip_aliases(text)
    nccl_aliases = {**aliases, **{k: aliases.get(v, v) for k, v in hdr.nccl_aliases(nccl_text).items()}}
    out = [_compare(f, decl, aliases) for f in hdr.runtime_functions(text) + hdr.driver_functions(text)]
    out += [_compare(f, decl, nccl_aliases) for f in hdr.nccl_functions(nccl_text)]
    return [m for m in out if m]


def check_symbols(table, text: str, decl: hp.Declarations) -> list[str]:
    bad = []
    for fn in hdr.runtime_functions(text) + hdr.driver_functions(text):
        bound = decl.symbols.get(fn.symbol)
        if bound is None:
            if fn.required:
                bad.append(f"{fn.symbol}: no symbol in this release")
            continue
        want = (bound,) if bound != fn.symbol else ()
        have = tuple(table.symbol_alternatives.get(fn.name, ()))[:1]
        if have != want:
            bad.append(f"{fn.name}: the release binds {bound}; symbol_alternatives heads {have}")
    return bad


def _config_offsets() -> dict[str, int]:
    """Offsets of our mcy_nccl_config prefix as the shim is built (default mode, gcc)."""
    return _our_config_offsets(str(hdr.INCLUDE))


@functools.lru_cache(maxsize=None)
def _our_config_offsets(include: str) -> dict[str, int]:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc to lay out mcy_nccl_config: apt-get install gcc")
    src = ('#include <stdio.h>\n#include "mcy_nccl_names.h"\nint main(void){'
           + "".join(f'printf("{f} %zu\\n", offsetof(mcy_nccl_config, {f}));' for f in CONFIG_FIELDS)
           + "return 0;}\n")
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([gcc, "-std=c11", "-I", include, "-x", "c", "-", "-o", f"{d}/cfg"],
                       input=src, text=True, check=True, capture_output=True, timeout=60)
        out = subprocess.run([f"{d}/cfg"], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def check_rccl(nccl_text: str, dump: dict, config_offsets: dict[str, int]) -> list[str]:
    ours = hdr.defines(nccl_text)
    bad = []
    for left, right in hdr.nccl_checks(nccl_text):
        if right.startswith("offsetof(ncclConfig_t,"):
            f = right[len("offsetof(ncclConfig_t,"):-1].strip()
            got = dump["structs"]["ncclConfig_t"]["offsets"][f]
            if config_offsets[f] != got:
                bad.append(f"{left} = {config_offsets[f]}, {right} = {got}")
            continue
        if right == "sizeof(ncclUniqueId)":
            got = dump["structs"]["ncclUniqueId"]["size"]
        else:
            got = next((dump["values"][n] for n in (right, *RCCL_SPELLINGS.get(right, ()))
                        if dump["values"].get(n) is not None), None)
            if got is None:
                if right not in RCCL_UNPROVABLE:
                    bad.append(f"{right}: not in RCCL's bindings")
                continue
        if ours[left] != got:
            bad.append(f"{left} = {ours[left]}, {right} = {got}")
    return bad


# ------------------------------------------------------------------ the proofs

def test_release_is_the_one_claimed(release):
    """(a) The wheel holds the ROCm release the table claims, and table_for picks that table."""
    table, dump, _decl = release
    proof = next(p for p in table.proofs if p.tool == "hip-python" and p.version.startswith(dump["rocm_version"]))
    assert f"{dump['hip_version_major']}.{dump['hip_version_minor']}" == proof.release
    assert tables.table_for("rocm", dump["hip_version"]) is table
    assert tables.proof_gap("rocm", dump["hip_version"]) is None


def test_table_matches_release(release):
    """(b) Every value of the table equals the release's."""
    table, dump, decl = release
    assert check_table(table, dump, decl) == []


def test_shared_constants_match_release(release):
    """(c) Every MCY_* constant both vendors share equals this release's value."""
    _table, dump, _decl = release
    assert check_constants(CUDA_TEXT, dump) == []


def test_prototypes_match_release(release):
    """(d) Every runtime, driver and NCCL prototype we bind equals the release's."""
    _table, _dump, decl = release
    assert check_prototypes(CUDA_TEXT, NCCL_TEXT, decl) == []


def test_symbols_match_release(release):
    """(e) Renamed symbols head symbol_alternatives; nothing else has one."""
    table, _dump, decl = release
    assert check_symbols(table, CUDA_TEXT, decl) == []


def test_rccl_values_match_release(release):
    """(f) RCCL's enum values, unique-id size and config prefix equal ours."""
    _table, dump, _decl = release
    assert check_rccl(NCCL_TEXT, dump, _config_offsets()) == []


# ------------------------------------------------------------------ negative controls

@pytest.mark.parametrize("field,value,expect", [
    ("attr_pci_domain_id", 70, "attr_pci_domain_id: ours 70"),
    ("prop_arch_name_offset", 1164, "offsetof(hipDeviceProp_t, gcnArchName) = 1160"),
    ("pointer_attrs_size", 24, "sizeof(hipPointerAttribute_t) = 32"),
    ("memory_type_names", MappingProxyType({0: "host", 1: "device", 2: "device", 3: "managed"}),
     "memory_type_names"),
    ("driver_functions", frozenset({"Init"}), "driver_functions"),
])
def test_wrong_table_value_is_caught(newest, field, value, expect):
    table, dump, decl = newest
    bad = check_table(dataclasses.replace(table, **{field: value}), dump, decl)
    assert any(expect in m for m in bad), bad


def test_wrong_constant_is_caught(newest):
    _table, dump, _decl = newest
    text = CUDA_TEXT.replace("#define MCY_ERROR_NOT_READY 600", "#define MCY_ERROR_NOT_READY 601")
    assert check_constants(text, dump) == ["MCY_ERROR_NOT_READY = 601, hipErrorNotReady = 600"]


def test_wrong_prototype_is_caught(newest):
    _table, _dump, decl = newest
    old = "X(Malloc, hipMalloc, cudaError_t, (void **devPtr, size_t size))"
    text = CUDA_TEXT.replace(old, old.replace("size_t size", "int size"))
    bad = check_prototypes(text, NCCL_TEXT, decl)
    assert len(bad) == 1 and bad[0].startswith("hipMalloc: ours int (void **, int)"), bad
    nccl = NCCL_TEXT.replace("int root, ncclComm_t comm", "unsigned int root, ncclComm_t comm")
    assert any(m.startswith("ncclBroadcast") for m in check_prototypes(CUDA_TEXT, nccl, decl))


def test_wrong_symbol_is_caught(newest):
    table, _dump, decl = newest
    stale = dataclasses.replace(table, symbol_alternatives=MappingProxyType({}))
    assert check_symbols(stale, CUDA_TEXT, decl) == [
        "GetDeviceProperties: the release binds hipGetDevicePropertiesR0600; "
        "symbol_alternatives heads ()"]
    extra = dataclasses.replace(table, symbol_alternatives=MappingProxyType(
        {**table.symbol_alternatives, "Malloc": ("hipMalloc_v2",)}))
    assert any(m.startswith("Malloc:") for m in check_symbols(extra, CUDA_TEXT, decl))


def test_wrong_rccl_value_is_caught(newest):
    _table, dump, _decl = newest
    nccl = NCCL_TEXT.replace("#define MCY_NCCL_BFLOAT16 9", "#define MCY_NCCL_BFLOAT16 10")
    assert check_rccl(nccl, dump, _config_offsets()) == ["MCY_NCCL_BFLOAT16 = 10, ncclBfloat16 = 9"]
    shifted = {**_config_offsets(), "blocking": 20}
    assert check_rccl(NCCL_TEXT, dump, shifted) == [
        "offsetof(mcy_nccl_config, blocking) = 20, offsetof(ncclConfig_t, blocking) = 16"]
