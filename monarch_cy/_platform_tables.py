"""Values of the GPU runtime that differ between vendors or versions.

Everything both vendors share lives in ``include/mcy_cuda_names.h`` as MCY_*
constants.  What differs lives here, one :class:`PlatformTable` per runtime
release line, chosen by :func:`table_for` from the platform and the runtime's
own version number.

These numbers are the shim's ABI, so every table lists its :class:`Proof` s:
the vendor releases whose real headers or bindings CI checks it against, value
by value -- ``tests/test_vendor_headers.py`` compiles against C headers (the
CUDA runtime wheels, Debian's HIP 5.2), ``tests/test_hip_python_proof.py`` reads
AMD's ``hip-python`` bindings, which are generated from and compiled against
each ROCm release's headers.  Those tests take their list of releases from the
tables here, so a claim and its check cannot drift apart.

A runtime outside the proven span of its table still binds (the vendors keep
these values stable within a major release), and :func:`proof_gap` says so in
words that name the nearest proven release; the loader turns that into an
:class:`~monarch_cy._errors.UnprovenRuntimeWarning`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

__all__ = ["PlatformTable", "Proof", "table_for", "proof_gap", "proof_statement", "release_of", "TABLES",
           "CUDA13", "CUDA12", "HIP5", "HIP6", "HIP7", "MEMORY_TYPES"]

# Our normalised memory kinds, returned by pointer-attribute queries.
MEMORY_TYPES = ("unregistered", "host", "device", "managed")


@dataclass(frozen=True)
class Proof:
    """One vendor release a table is checked against in CI.

    Attributes:
        release: the release line, ``"major.minor"`` (``"12.9"``, ``"7.2"``).
        tool: what carries that release's declarations: ``"hip-python"``,
            ``"nvidia-cuda-runtime"`` / ``"nvidia-cuda-runtime-cu12"`` (header
            wheels) or ``"libamdhip64-dev"`` (Debian's HIP headers).
        version: the tool's exact version (the pin the test installs).
    """

    release: str
    tool: str
    version: str

    def key(self) -> tuple[int, int]:
        major, minor = self.release.split(".")
        return int(major), int(minor)

    def __str__(self) -> str:
        return f"{self.tool} {self.version}"


@dataclass(frozen=True)
class PlatformTable:
    """One runtime release line's vendor-specific values.

    Attributes:
        name: table name, e.g. ``"cuda13"``.
        platform: ``"cuda"`` or ``"rocm"``.
        symbol_alternatives: CUDA name (without prefix) -> symbol names to try
            before the default one, in order (versioned symbols such as
            ``cudaGetDeviceProperties_v2``).
        ipc_lazy_enable_peer_access: value of the IPC open flag.
        attr_*: device-attribute numbers for ``DeviceGetAttribute``.
        pointer_attrs_size: bytes the pointer-attribute struct occupies.
        pointer_type_offset, pointer_device_offset, pointer_devptr_offset,
        pointer_hostptr_offset: field offsets in that struct.
        pointer_managed_offset: offset of an ``isManaged`` int, or ``None``.
        memory_type_names: vendor memory-type value -> our name (MEMORY_TYPES).
        device_prop_size: bytes of the device-properties struct (the shim
            passes a buffer of ``DEVICE_PROP_BUFFER_SIZE`` >= this).
        prop_name_offset, prop_total_mem_offset: offsets of ``name`` and
            ``totalGlobalMem`` in it.
        prop_arch_name_offset: offset of ``gcnArchName`` (ROCm) or ``None``.
        no_device_statuses: statuses meaning "no usable GPU here".
        driver_functions: which of the optional driver-level functions
            (``MCY_DRIVER_FUNCTIONS``: Init, MemGetAddressRange,
            MemGetHandleForAddressRange, GetErrorName) the line declares.
        proofs: the releases CI proves every value above against.
    """

    name: str
    platform: str
    symbol_alternatives: Mapping[str, tuple[str, ...]]
    ipc_lazy_enable_peer_access: int
    attr_compute_capability_major: int
    attr_compute_capability_minor: int
    attr_multiprocessor_count: int
    attr_pci_bus_id: int
    attr_pci_device_id: int
    attr_pci_domain_id: int
    pointer_attrs_size: int
    pointer_type_offset: int
    pointer_device_offset: int
    pointer_devptr_offset: int
    pointer_hostptr_offset: int
    pointer_managed_offset: int | None
    memory_type_names: Mapping[int, str]
    device_prop_size: int
    prop_name_offset: int
    prop_total_mem_offset: int
    prop_arch_name_offset: int | None
    no_device_statuses: frozenset[int] = field(default_factory=frozenset)
    driver_functions: frozenset[str] = field(default_factory=frozenset)
    proofs: tuple[Proof, ...] = ()

    def attribute_numbers(self) -> dict[str, int]:
        """The device-attribute numbers by our name (for the shim's ``bind``)."""
        return {
            "compute_capability_major": self.attr_compute_capability_major,
            "compute_capability_minor": self.attr_compute_capability_minor,
            "multiprocessor_count": self.attr_multiprocessor_count,
            "pci_bus_id": self.attr_pci_bus_id,
            "pci_device_id": self.attr_pci_device_id,
            "pci_domain_id": self.attr_pci_domain_id,
        }

    @property
    def vendor(self) -> str:
        return "CUDA" if self.platform == "cuda" else "ROCm"

    def provenance(self) -> str:
        """How the table is proven, in words (``monarch-cy info`` shows it)."""
        if not self.proofs:
            return "not proven"
        by_tool: dict[str, list[str]] = {}
        for p in self.proofs:
            by_tool.setdefault(p.tool, []).append(p.version)
        return "proven in CI against " + "; ".join(
            f"{tool} {', '.join(versions)}" for tool, versions in by_tool.items())


_CUDA_MEMORY_TYPES = MappingProxyType({0: "unregistered", 1: "host", 2: "device", 3: "managed"})
_ALL_DRIVER_FUNCTIONS = frozenset({"Init", "MemGetAddressRange", "MemGetHandleForAddressRange",
                                   "GetErrorName"})

CUDA13 = PlatformTable(
    name="cuda13",
    platform="cuda",
    symbol_alternatives=MappingProxyType({}),
    ipc_lazy_enable_peer_access=1,
    attr_compute_capability_major=75,
    attr_compute_capability_minor=76,
    attr_multiprocessor_count=16,
    attr_pci_bus_id=33,
    attr_pci_device_id=34,
    attr_pci_domain_id=50,
    pointer_attrs_size=88,
    pointer_type_offset=0,
    pointer_device_offset=4,
    pointer_devptr_offset=8,
    pointer_hostptr_offset=16,
    pointer_managed_offset=None,
    memory_type_names=_CUDA_MEMORY_TYPES,
    device_prop_size=1008,
    prop_name_offset=0,
    prop_total_mem_offset=288,
    prop_arch_name_offset=None,
    # cudaErrorInsufficientDriver (no driver), cudaErrorNoDevice.
    no_device_statuses=frozenset({35, 100}),
    driver_functions=_ALL_DRIVER_FUNCTIONS,
    proofs=(Proof("13.0", "nvidia-cuda-runtime", "13.0.96"),
            Proof("13.5", "nvidia-cuda-runtime", "13.5.37")),
)

# CUDA 12: pointer attributes are 24 bytes (13 added reserved words), the
# properties struct 1032 (13 dropped fields), and cudaGetDeviceProperties is
# exported as the versioned cudaGetDeviceProperties_v2.
CUDA12 = replace(
    CUDA13,
    name="cuda12",
    symbol_alternatives=MappingProxyType({"GetDeviceProperties": ("cudaGetDeviceProperties_v2",)}),
    pointer_attrs_size=24,
    device_prop_size=1032,
    proofs=(Proof("12.0", "nvidia-cuda-runtime-cu12", "12.0.146"),
            Proof("12.9", "nvidia-cuda-runtime-cu12", "12.9.79")),
)

HIP5 = PlatformTable(
    name="hip5",
    platform="rocm",
    symbol_alternatives=MappingProxyType({}),
    ipc_lazy_enable_peer_access=0,
    attr_compute_capability_major=23,
    attr_compute_capability_minor=61,
    attr_multiprocessor_count=63,
    attr_pci_bus_id=67,
    attr_pci_device_id=68,
    attr_pci_domain_id=69,
    pointer_attrs_size=32,
    pointer_type_offset=0,
    pointer_device_offset=4,
    pointer_devptr_offset=8,
    pointer_hostptr_offset=16,
    pointer_managed_offset=24,
    # HIP 5: Host 0, Device 1, Array 2, Unified 3; managed comes from isManaged.
    memory_type_names=MappingProxyType({0: "host", 1: "device", 2: "device", 3: "managed"}),
    device_prop_size=792,
    prop_name_offset=0,
    prop_total_mem_offset=256,
    prop_arch_name_offset=396,
    # hipErrorInsufficientDriver, hipErrorNoDevice.
    no_device_statuses=frozenset({35, 100}),
    driver_functions=frozenset({"Init", "MemGetAddressRange"}),
    proofs=(Proof("5.2", "libamdhip64-dev", "5.2.3"),),
)

# ROCm 6: hipDeviceProp_tR0600 (cudaDeviceProp's head: name, uuid, luid, mask),
# exported as hipGetDevicePropertiesR0600; memory types renumbered after CUDA's
# (Array 10, Unified 11); the IPC lazy flag became 1; hipDrvGetErrorName.
HIP6 = replace(
    HIP5,
    name="hip6",
    symbol_alternatives=MappingProxyType({"GetDeviceProperties": ("hipGetDevicePropertiesR0600",)}),
    ipc_lazy_enable_peer_access=1,
    memory_type_names=MappingProxyType(
        {0: "unregistered", 1: "host", 2: "device", 3: "managed", 10: "device", 11: "managed"}),
    device_prop_size=1472,
    prop_total_mem_offset=288,
    prop_arch_name_offset=1160,
    driver_functions=frozenset({"Init", "MemGetAddressRange", "GetErrorName"}),
    proofs=(Proof("6.2", "hip-python", "6.2.0.499.16"),
            Proof("6.4", "hip-python", "6.4.4.555.40")),
)

# ROCm 7: every value above as in 6; new is hipMemGetHandleForAddressRange
# (dma-buf export of device memory).
HIP7 = replace(
    HIP6,
    name="hip7",
    driver_functions=_ALL_DRIVER_FUNCTIONS,
    proofs=(Proof("7.0", "hip-python", "7.0.2.555.40"),
            Proof("7.2", "hip-python", "7.2.2.562.43")),
)

TABLES: tuple[PlatformTable, ...] = (CUDA12, CUDA13, HIP5, HIP6, HIP7)
# Major version -> table; a major above the newest binds the newest, with a warning.
_BY_MAJOR = {"cuda": {12: CUDA12, 13: CUDA13}, "rocm": {5: HIP5, 6: HIP6, 7: HIP7}}

# Generous upper bound for any device-properties struct we may be handed.
DEVICE_PROP_BUFFER_SIZE = 8192
POINTER_ATTRS_BUFFER_SIZE = 512


def release_of(platform: str, runtime_version: int) -> tuple[int, int]:
    """``(major, minor)`` of what ``RuntimeGetVersion`` reports.

    CUDA encodes major*1000 + minor*10 (13000 for 13.0); HIP encodes
    major*10_000_000 + minor*100_000 + patch (70_253_211 for 7.2).
    """
    if platform == "cuda":
        return runtime_version // 1000, (runtime_version % 1000) // 10
    if platform == "rocm":
        return runtime_version // 10_000_000, (runtime_version // 100_000) % 100
    raise ValueError(f"platform must be 'cuda' or 'rocm', got {platform!r}")


def table_for(platform: str, runtime_version: int) -> PlatformTable:
    """The table for ``platform`` ("cuda"/"rocm") at ``runtime_version``.

    The table of the runtime's major release; a major newer than any table's
    gets the newest table (see :func:`proof_gap` for the warning it deserves);
    an older one than supported raises ``ValueError`` naming the version.
    """
    major, minor = release_of(platform, runtime_version)
    lines = _BY_MAJOR[platform]
    if major in lines:
        return lines[major]
    if major > max(lines):
        return lines[max(lines)]
    oldest = lines[min(lines)].proofs[0].release
    vendor = "CUDA" if platform == "cuda" else "HIP"
    raise ValueError(
        f"{vendor} runtime version {runtime_version} ({major}.{minor}) is older than "
        f"{min(lines)}.0, the oldest supported (proven from {oldest})"
    )


def proof_gap(platform: str, runtime_version: int) -> str | None:
    """Why the table :func:`table_for` picks is not proven for this runtime, or None.

    ``None`` when the runtime's ``major.minor`` lies within its table's proven
    releases (first to last); otherwise one sentence naming the version, the
    table bound anyway and the nearest proven release.
    """
    table = table_for(platform, runtime_version)
    major, minor = release_of(platform, runtime_version)
    first, last = table.proofs[0], table.proofs[-1]
    if first.key() <= (major, minor) <= last.key():
        return None
    side, nearest = ("newer", last) if (major, minor) > last.key() else ("older", first)
    return (
        f"{table.vendor} {major}.{minor} (runtime version {runtime_version}) is {side} than "
        f"every release the {table.name} table is proven against; it is bound anyway, "
        f"with the values of {table.vendor} {nearest.release} (proven in CI against "
        f"{nearest}). Report a problem with the exact version."
    )


def proof_statement(platform: str, runtime_version: int) -> str:
    """One line on how the table for this runtime is proven (``monarch-cy info``)."""
    table = table_for(platform, runtime_version)
    major, minor = release_of(platform, runtime_version)
    head = f"{table.vendor} {major}.{minor}, table {table.name}"
    exact = [p for p in table.proofs if p.key() == (major, minor)]
    if exact:
        return f"{head}, proven against {exact[0]} in CI"
    gap = proof_gap(platform, runtime_version)
    if gap is None:
        first, last = table.proofs[0], table.proofs[-1]
        return (f"{head}, between the releases it is proven against in CI "
                f"({table.vendor} {first.release}: {first}; {last.release}: {last})")
    return f"{head}, NOT proven for this release: {gap}"
