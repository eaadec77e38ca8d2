"""Sharing device memory between processes of one host (CUDA/HIP IPC)."""

from __future__ import annotations

from monarch_cy._checks import is_int
from monarch_cy._gpu._device import Device, as_device, on_device, shim
from monarch_cy._gpu._memory import DeviceMemory, _nbytes
from monarch_cy._gpu._registry import provide
from monarch_cy._resource import Owned

HANDLE_SIZE = 64


@provide
class IpcHandle:
    """The 64 opaque bytes naming an allocation, plus what an opener needs.

    ``offset`` is where the shared span starts inside the allocation (memory
    borrowed from torch's caching allocator sits inside larger blocks).

    Picklable and small.  Validated on construction: exactly 64 bytes, a
    non-negative size and device.  ``pci_bus_id`` (when known) lets the opener
    pick the same physical GPU even where device ordinals differ between
    processes (``CUDA_VISIBLE_DEVICES``).
    """

    __slots__ = ("handle", "nbytes", "device", "pci_bus_id", "offset")

    def __init__(
        self, handle: bytes, nbytes: int, device: int, pci_bus_id: str | None = None, offset: int = 0
    ):
        if not isinstance(handle, (bytes, bytearray, memoryview)):
            raise TypeError(f"handle must be bytes, got {type(handle).__name__}")
        handle = bytes(handle)
        if len(handle) != HANDLE_SIZE:
            raise ValueError(f"handle must be exactly {HANDLE_SIZE} bytes, got {len(handle)}")
        if not is_int(device) or device < 0:
            raise ValueError(f"device must be a non-negative int ordinal, got {device!r}")
        self.handle = handle
        self.nbytes = _nbytes(nbytes)
        self.device = device
        self.pci_bus_id = pci_bus_id
        self.offset = _nbytes(offset, "offset")

    def __reduce__(self):
        return (IpcHandle, (self.handle, self.nbytes, self.device, self.pci_bus_id, self.offset))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IpcHandle) and self.__reduce__() == other.__reduce__()

    def __hash__(self) -> int:
        return hash(self.handle)

    def __repr__(self) -> str:
        return f"<IpcHandle {self.nbytes} bytes on device {self.device} ({self.pci_bus_id})>"

    def _local_device(self) -> Device:
        """The device in this process that holds the memory."""
        if self.pci_bus_id:
            rt = shim()
            for ordinal in range(rt.getDeviceCount()):
                if rt.deviceGetPCIBusId(ordinal).lower() == self.pci_bus_id.lower():
                    return Device(ordinal)
        return Device(self.device)

    def open(self, device: Device | int | None = None) -> "IpcMapping":
        """Map the memory into this process (not the exporting one: the runtimes
        refuse that).  ``device`` defaults to the same physical GPU."""
        return IpcMapping(self, device)


class IpcMapping(DeviceMemory):
    """Another process's device memory mapped here; ``close()`` unmaps it.

    The exporter must keep its allocation alive until every mapping is closed.
    """

    def __init__(self, handle: IpcHandle, device: Device | int | None = None) -> None:
        Owned.__init__(self)
        if not isinstance(handle, IpcHandle):
            raise TypeError(f"handle must be an IpcHandle, got {type(handle).__name__}")
        self.device = handle._local_device() if device is None else as_device(device)
        rt = shim()
        with on_device(self.device.ordinal):
            base = rt.ipcOpenMemHandle(handle.handle)
        self._init_span(base + handle.offset, handle.nbytes)
        self._own(rt.ipcCloseMemHandle, base)
        self.source = handle
        self.device.adopt(self)

    def _before_close(self) -> None:
        pass

