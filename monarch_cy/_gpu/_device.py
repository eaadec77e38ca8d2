"""Devices: choosing one, reading its properties, and scoping what is made on it."""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass
from typing import Iterator

from monarch_cy import _runtime
from monarch_cy._checks import is_int
from monarch_cy._gpu._registry import CLASSES
from monarch_cy._resource import Owned


def shim():
    """The bound flat tier (binds the runtime on first use)."""
    from monarch_cy import _hip_shim  # import time: the shim is loaded with the first object made

    _runtime.ensure_bound()
    return _hip_shim


def device_count() -> int:
    """Number of devices the runtime sees.  ``NoDeviceError`` where there are none."""
    return shim().getDeviceCount()


def _validate_ordinal(ordinal: object) -> int:
    if not is_int(ordinal):
        raise TypeError(f"device must be an int ordinal or a Device, got {ordinal!r}")
    count = device_count()
    if not 0 <= ordinal < count:
        raise ValueError(f"device {ordinal} does not exist: this process sees {count} device(s)")
    return ordinal


@contextlib.contextmanager
def on_device(ordinal: int) -> Iterator[None]:
    """Make ``ordinal`` current for the calling thread, restoring the previous one."""
    rt = shim()
    prev = rt.getDevice()
    if prev == ordinal:
        yield
        return
    rt.setDevice(ordinal)
    try:
        yield
    finally:
        rt.setDevice(prev)


@dataclass(frozen=True)
class DeviceProperties:
    """What a device is.  ``compute_capability`` is CUDA's (major, minor); ``arch``
    is ``"sm_90"`` on CUDA and the gfx name (``"gfx90a:sramecc+:xnack-"``) on ROCm
    where the runtime's layout is known, else ``None``."""

    ordinal: int
    name: str
    pci_bus_id: str
    total_memory: int
    compute_capability: tuple[int, int]
    arch: str | None
    multiprocessor_count: int
    platform: str


class Device(Owned):
    """One GPU, by ordinal (default: the calling thread's current device).

    A ``Device`` is the parent of what is made through it (:meth:`buffer`,
    :meth:`stream`, :meth:`event`, or any constructor given this object as
    ``device=``).  ``close()`` closes those children; it frees nothing else.
    As a context manager it makes the device current for the calling thread,
    and on exit closes its children and restores the previous current device.
    """

    def __init__(self, ordinal: int | None = None) -> None:
        super().__init__()
        self.ordinal = shim().getDevice() if ordinal is None else _validate_ordinal(ordinal)
        self._children: weakref.WeakSet[Owned] = weakref.WeakSet()
        self._children_lock = threading.Lock()
        self._props: DeviceProperties | None = None
        self._saved: list[int] = []

    @staticmethod
    def count() -> int:
        return device_count()

    @classmethod
    def current(cls) -> "Device":
        return cls(None)

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<Device {self.ordinal}{state}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other.ordinal == self.ordinal

    def __hash__(self) -> int:
        return hash(("Device", self.ordinal))

    # -- children
    def adopt(self, child: Owned) -> None:
        """Record ``child`` so that :meth:`close` closes it first."""
        self._check_open()
        with self._children_lock:
            self._children.add(child)

    def _before_close(self) -> None:
        with self._children_lock:
            children = list(self._children)
            self._children.clear()
        for child in children:
            child.close()

    # DeviceBuffer, Stream and Event are defined above this module (_registry).
    def buffer(self, nbytes: int):
        return CLASSES["DeviceBuffer"](nbytes, device=self)

    def stream(self, non_blocking: bool = True):
        return CLASSES["Stream"](device=self, non_blocking=non_blocking)

    def event(self, **kwargs):
        return CLASSES["Event"](device=self, **kwargs)

    # -- queries
    @property
    def properties(self) -> DeviceProperties:
        if self._props is None:
            rt = shim()
            binding = _runtime.current()
            table = binding.table
            props = rt.getDeviceProperties(self.ordinal)
            attrs = {
                k: rt.deviceGetAttribute(v, self.ordinal)
                for k, v in table.attribute_numbers().items()
            }
            cc = (attrs["compute_capability_major"], attrs["compute_capability_minor"])
            arch = props["arch_name"]
            if table.platform == "cuda":
                arch = f"sm_{cc[0]}{cc[1]}"
            self._props = DeviceProperties(
                ordinal=self.ordinal,
                name=props["name"],
                pci_bus_id=rt.deviceGetPCIBusId(self.ordinal),
                total_memory=props["total_memory"],
                compute_capability=cc,
                arch=arch,
                multiprocessor_count=attrs["multiprocessor_count"],
                platform=table.platform,
            )
        return self._props

    def mem_info(self) -> tuple[int, int]:
        """``(free_bytes, total_bytes)`` now."""
        with on_device(self.ordinal):
            return shim().memGetInfo()

    def synchronize(self) -> None:
        """Block until all work on this device is done (GIL released meanwhile)."""
        with on_device(self.ordinal):
            shim().deviceSynchronize()

    def can_access_peer(self, peer: "Device | int") -> bool:
        other = peer.ordinal if isinstance(peer, Device) else _validate_ordinal(peer)
        return shim().deviceCanAccessPeer(self.ordinal, other)

    def enable_peer_access(self, peer: "Device | int") -> None:
        """Let kernels and copies on this device reach ``peer``'s memory; idempotent."""
        other = peer.ordinal if isinstance(peer, Device) else _validate_ordinal(peer)
        with on_device(self.ordinal):
            shim().deviceEnablePeerAccess(other)

    def use(self) -> None:
        """Make this the calling thread's current device."""
        self._check_open()
        shim().setDevice(self.ordinal)

    def __enter__(self) -> "Device":
        self._check_open()
        rt = shim()
        self._saved.append(rt.getDevice())
        rt.setDevice(self.ordinal)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        finally:
            if self._saved:
                shim().setDevice(self._saved.pop())


def as_device(device: "Device | int | None") -> Device:
    """A ``Device`` from a ``Device``, an ordinal or ``None`` (the current device)."""
    if isinstance(device, Device):
        device._check_open()
        return device
    return Device(device)

