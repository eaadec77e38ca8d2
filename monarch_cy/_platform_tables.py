"""Values of the GPU runtime that differ between vendors or versions.

Everything both vendors share lives in ``include/mcy_cuda_names.h`` as MCY_*
constants.  What differs lives here, one :class:`PlatformTable` per runtime
family, chosen by :func:`table_for` from the platform and the runtime's own
version number.

Provenance (kept honest, because these numbers are the shim's ABI):

* ``CUDA13`` and ``CUDA12``: checked by ``tests/test_vendor_headers.py`` against
  the real CUDA 13 headers (the ``nvidia-cuda-runtime`` wheels) in CI; CUDA 12
  differs only where noted (pointer attributes were 24 bytes, and
  ``cudaGetDeviceProperties`` is exported as ``cudaGetDeviceProperties_v2``).
* ``HIP5``: checked against Debian's HIP 5.2 headers (``libamdhip64-dev``) in CI.
* ``HIP6``: ROCm 6 and later, from AMD's published headers; no ROCm 6 headers
  are installable on the CI machine, so the header test cannot prove these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

__all__ = ["PlatformTable", "table_for", "CUDA13", "CUDA12", "HIP5", "HIP6", "MEMORY_TYPES"]

# Our normalised memory kinds, returned by pointer-attribute queries.
MEMORY_TYPES = ("unregistered", "host", "device", "managed")


@dataclass(frozen=True)
class PlatformTable:
    """One runtime family's vendor-specific values.

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
        device_prop_size: bytes of the device-properties struct (upper bound
            is what matters: the shim passes a buffer of at least this size).
        prop_name_offset, prop_total_mem_offset: offsets of ``name`` and
            ``totalGlobalMem`` in it.
        prop_arch_name_offset: offset of ``gcnArchName`` (ROCm) or ``None``.
        no_device_statuses: statuses meaning "no usable GPU here".
        verified: where the values were proven.
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
    verified: str = ""

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


_CUDA_MEMORY_TYPES = MappingProxyType({0: "unregistered", 1: "host", 2: "device", 3: "managed"})

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
    verified="CUDA 13.0 headers, in CI",
)

CUDA12 = PlatformTable(
    **{
        **CUDA13.__dict__,
        "name": "cuda12",
        "symbol_alternatives": MappingProxyType(
            {"GetDeviceProperties": ("cudaGetDeviceProperties_v2",)}
        ),
        "pointer_attrs_size": 24,
        "verified": "CUDA 12 layout differs from 13 only in the pointer-attribute size",
    }
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
    verified="HIP 5.2 headers, in CI",
)

HIP6 = PlatformTable(
    **{
        **HIP5.__dict__,
        "name": "hip6",
        "symbol_alternatives": MappingProxyType(
            {"GetDeviceProperties": ("hipGetDevicePropertiesR0600",)}
        ),
        "ipc_lazy_enable_peer_access": 1,
        "pointer_managed_offset": 24,
        "memory_type_names": MappingProxyType(
            {0: "unregistered", 1: "host", 2: "device", 3: "managed", 10: "device", 11: "managed"}
        ),
        # hipDeviceProp_tR0600 follows cudaDeviceProp's head (name, uuid, luid, mask).
        "device_prop_size": 4096,
        "prop_total_mem_offset": 288,
        "prop_arch_name_offset": None,
        "verified": "ROCm 6 published headers; not provable on the CI machine",
    }
)

# Generous upper bound for any device-properties struct we may be handed.
DEVICE_PROP_BUFFER_SIZE = 8192
POINTER_ATTRS_BUFFER_SIZE = 512


def table_for(platform: str, runtime_version: int) -> PlatformTable:
    """The table for ``platform`` ("cuda"/"rocm") at ``runtime_version``.

    ``runtime_version`` is what ``RuntimeGetVersion`` reports: CUDA encodes
    major*1000 + minor*10 (13000 for 13.0); HIP encodes
    major*10_000_000 + minor*100_000 + patch (50_200_000 and up for 5.2).
    """
    if platform == "cuda":
        if runtime_version >= 13000:
            return CUDA13
        if runtime_version >= 12000:
            return CUDA12
        raise ValueError(
            f"CUDA runtime version {runtime_version} is older than 12.0, the oldest supported"
        )
    if platform == "rocm":
        major = runtime_version // 10_000_000
        if major >= 6:
            return HIP6
        if major == 5:
            return HIP5
        raise ValueError(
            f"HIP runtime version {runtime_version} is older than 5.0, the oldest supported"
        )
    raise ValueError(f"platform must be 'cuda' or 'rocm', got {platform!r}")
