"""Memory: device buffers, pinned host buffers, borrowed memory, and copies.

Every memory object has ``ptr`` (an address valid in this process), ``nbytes``
and ``kind`` (``"device"`` or ``"host"``).  Owning ones (``DeviceBuffer``,
``PinnedBuffer``) free their memory on ``close()``; borrowed ones
(``DeviceMemory`` / ``HostMemory`` made by :func:`wrap_torch` or from a
buffer) keep their owner alive and free nothing.

Copies between any two of them: :func:`monarch_cy._gpu._copy.copy`.
"""

from __future__ import annotations

from typing import Any

from monarch_cy._checks import check_int, is_int
from monarch_cy._gpu._device import Device, as_device, on_device, shim
from monarch_cy._gpu._registry import CLASSES, provide
from monarch_cy._gpu._stream import Stream, stream_handle
from monarch_cy._hostmem import BufferPin, HostRegion
from monarch_cy._resource import Owned


def _nbytes(value: object, name: str = "nbytes") -> int:
    """A byte count or offset: an int >= 0 below 2**63 (:func:`check_int`)."""
    n = check_int(name, value, minimum=0)
    if n >= 1 << 63:
        raise ValueError(f"{name} is too large: {n}")
    return n


class Memory(Owned):
    """Base: ``nbytes`` at ``ptr``.  ``ptr`` raises once closed."""

    kind = "host"

    def _init_span(self, ptr: int, nbytes: int, owner: Any = None) -> None:
        self._ptr = ptr
        self.nbytes = nbytes
        self._owner = owner

    @property
    def ptr(self) -> int:
        self._check_open()
        return self._ptr

    def __len__(self) -> int:
        return self.nbytes

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._ptr:#x}"
        return f"<{type(self).__name__} {self.nbytes} bytes at {state}>"


class DeviceMemory(Memory):
    """Device memory borrowed from someone else (a torch tensor, an address).

    ``owner`` is kept alive as long as this object is open.
    """

    kind = "device"

    def __init__(self, ptr: int, nbytes: int, device: Device | int | None = None, owner: Any = None):
        super().__init__()
        if not is_int(ptr) or ptr < 0:
            raise ValueError(f"ptr must be a non-negative int address, got {ptr!r}")
        self.device = as_device(device)
        self._init_span(ptr, _nbytes(nbytes), owner)

    def _before_close(self) -> None:
        self._owner = None

    @property
    def __cuda_array_interface__(self) -> dict:
        """A 1-D ``uint8`` view for torch/CuPy/Numba.  No stream is named: the
        consumer must order its work after ours itself (synchronise first)."""
        return {
            "shape": (self.nbytes,),
            "typestr": "|u1",
            "data": (self.ptr, False),
            "strides": None,
            "version": 3,
        }

    def to_torch(self, dtype=None, shape=None):
        """A torch tensor over this memory, without a copy; it keeps ``self`` alive."""
        import torch  # import time: torch is imported only by the interop calls

        t = torch.as_tensor(self, device=f"cuda:{self.device.ordinal}")
        if dtype is not None:
            t = t.view(dtype)
        return t.view(shape) if shape is not None else t

    def ipc_handle(self):
        """A picklable handle another process on this host can open.

        Works for memory inside a larger allocation (a torch tensor in the
        caching allocator's block): the handle names the allocation and the
        offset.  The exporter must keep the memory alive while it is mapped.
        """
        rt = shim()
        base, _size = self._allocation()
        raw = rt.ipcGetMemHandle(base)
        bus = rt.deviceGetPCIBusId(self.device.ordinal)
        # IpcHandle is defined above this module (_registry).
        return CLASSES["IpcHandle"](raw, self.nbytes, self.device.ordinal, bus, offset=self.ptr - base)

    def _allocation(self) -> tuple[int, int]:
        """(base, size) of the runtime allocation holding this memory."""
        return shim().memGetAddressRange(self.ptr)

    def fill(self, value: int, stream: Stream | None = None) -> None:
        """Set every byte to ``value`` (0..255); blocks unless ``stream`` is given."""
        if not 0 <= int(value) <= 255:
            raise ValueError(f"value must be a byte (0..255), got {value!r}")
        rt = shim()
        if stream is None:
            with on_device(self.device.ordinal):
                rt.memset(self.ptr, int(value), self.nbytes)
        else:
            rt.memsetAsync(self.ptr, int(value), self.nbytes, stream_handle(stream))


@provide
class DeviceBuffer(DeviceMemory):
    """``nbytes`` of device memory on ``device``, owned: ``close()`` frees it.

    Memory is uninitialised.  ``ipc_handle()`` lets another process map it.
    """

    def __init__(self, nbytes: int, device: Device | int | None = None) -> None:
        Owned.__init__(self)
        n = _nbytes(nbytes)
        self.device = as_device(device)
        rt = shim()
        with on_device(self.device.ordinal):
            ptr = rt.malloc(n)
        self._init_span(ptr, n)
        self._own(rt.free, ptr)
        self.device.adopt(self)

    def _before_close(self) -> None:
        pass

    def _allocation(self) -> tuple[int, int]:
        return self.ptr, self.nbytes


class HostMemory(Memory):
    """Host memory borrowed from a buffer-protocol object or a CPU tensor.

    The exporter is pinned (cannot be resized or freed) until ``close()``.
    """

    def __init__(self, obj: Any, writable: bool = True) -> None:
        super().__init__()
        try:
            pin = BufferPin(obj, writable)
        except (TypeError, BufferError) as e:
            if not writable:
                raise TypeError(f"obj must support the buffer protocol, got {type(obj).__name__}") from e
            pin = BufferPin(obj, False)
        self.readonly = pin.readonly
        self._pin = pin
        self._init_span(pin.address, pin.nbytes, obj)

    @classmethod
    def from_address(cls, ptr: int, nbytes: int, owner: Any) -> "HostMemory":
        """Borrow ``nbytes`` at ``ptr``, kept valid by holding ``owner`` (a CPU tensor)."""
        if not is_int(ptr) or ptr < 0:
            raise ValueError(f"ptr must be a non-negative int address, got {ptr!r}")
        self = cls.__new__(cls)
        Owned.__init__(self)
        self.readonly = False
        self._pin = None
        self._init_span(ptr, _nbytes(nbytes), owner)
        return self

    def _before_close(self) -> None:
        if self._pin is not None:
            self._pin.release()
        self._owner = None


class PinnedBuffer(Memory):
    """Page-locked host memory, owned; fast for copies to and from devices.

    ``view()`` gives a memoryview (and ``numpy()`` an array) over it; ``close()``
    refuses with ``BufferError`` while any such view is alive, so freed memory
    is never reachable from Python.
    """

    def __init__(self, nbytes: int, *, portable: bool = False, mapped: bool = False) -> None:
        super().__init__()
        n = _nbytes(nbytes)
        rt = shim()
        flags = (rt.HOST_ALLOC_PORTABLE if portable else 0) | (rt.HOST_ALLOC_MAPPED if mapped else 0)
        ptr = rt.hostAlloc(max(n, 1), flags)
        self._init_span(ptr, n)
        self._region = HostRegion(ptr, n)
        self._own(rt.freeHost, ptr)

    def _before_close(self) -> None:
        self._region.release()

    def view(self) -> memoryview:
        self._check_open()
        return memoryview(self._region)

    def numpy(self):
        import numpy as np  # import time: numpy only for this view

        return np.frombuffer(self.view(), dtype=np.uint8)


class HostRegistration(Owned):
    """Page-lock an existing writable buffer (numpy array, bytearray) in place.

    Copies from and to it then run at pinned speed.  ``close()`` unregisters and
    lets the buffer go.
    """

    def __init__(self, obj: Any) -> None:
        super().__init__()
        self.memory = HostMemory(obj, writable=True)
        rt = shim()
        try:
            rt.hostRegister(self.memory.ptr, self.memory.nbytes, rt.HOST_REGISTER_PORTABLE)
        except BaseException:
            self.memory.close()
            raise
        self._own(rt.hostUnregister, self.memory.ptr)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.memory.close()

