"""Protection domains and registered memory.

A :class:`ProtectionDomain` belongs to a :class:`~monarch_cy._verbs.Context`
and registers memory; each :class:`MemoryRegion` it makes keeps the PD (and so
the context) alive, and closing the PD deregisters its regions and destroys its
queue pairs first.  Who frees what:

* :meth:`ProtectionDomain.register` pins a Python buffer (numpy array,
  bytearray, mmap, memoryview) for the region's lifetime: the exporter cannot
  resize or free it until the region is closed.  The buffer must be contiguous:
  a non-contiguous view is refused (``ValueError``) rather than copied, because
  a copy would silently disconnect the registration from the caller's data.
* :meth:`ProtectionDomain.register_address` registers raw memory (a torch
  tensor's ``data_ptr()``, a pinned buffer); ``keepalive`` is held until close,
  and the caller guarantees the memory outlives the region.
* :meth:`ProtectionDomain.register_device` registers GPU memory: through a
  dma-buf when a ``get_dmabuf_fd(ptr, nbytes) -> fd`` callable is given (the GPU
  shim's ``memGetDmaBufFd``; the fd is closed here after registration), else or
  on failure by registering the device pointer itself (peer memory:
  ``nvidia-peermem`` / ``amdgpu`` peer-direct); ``VerbsError`` naming both
  failures when neither works.

Registration blocks while the kernel pins pages (GIL released).
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable

from monarch_cy import _rdma
from monarch_cy._checks import check_int
from monarch_cy._hostmem import BufferPin
from monarch_cy._verbs._device import Context
from monarch_cy._errors import VerbsError
from monarch_cy._verbs._records import RemoteRegion
from monarch_cy._resource import Owned

__all__ = ["ProtectionDomain", "MemoryRegion", "pin_buffer"]


def _int_arg(name: str, value: object, lo: int, hi: int) -> int:
    return check_int(name, value, minimum=lo, maximum=hi)


def pin_buffer(obj: object, writable: bool = True) -> BufferPin:
    """Pin ``obj``'s buffer for registration; clear errors for what cannot be registered."""
    try:
        pin = BufferPin(obj, writable)
    except TypeError:
        raise TypeError(
            f"buffer must support the buffer protocol (numpy array, bytearray, mmap, memoryview), "
            f"got {type(obj).__name__}") from None
    except ValueError as e:
        raise ValueError(
            f"buffer must be contiguous to be registered for RDMA ({e}); pass a contiguous copy "
            "(numpy.ascontiguousarray) explicitly") from None
    except BufferError as e:
        raise ValueError(
            f"buffer must be writable for RDMA ({e}); pass writable=False to register it "
            "for remote reads only") from None
    if pin.nbytes == 0:
        pin.release()
        raise ValueError("buffer is empty: cannot register 0 bytes for RDMA")
    return pin


def _release_region(mr: int, pin: BufferPin | None) -> None:
    try:
        _rdma.dereg_mr(mr)
    finally:
        if pin is not None:
            pin.release()


class ProtectionDomain(Owned):
    """A protection domain of ``context``: memory regions and queue pairs live in it."""

    __slots__ = ("context", "_pd", "_children", "_regions")

    def __init__(self, context: Context) -> None:
        super().__init__()
        if not isinstance(context, Context):
            raise TypeError(f"context must be a Context, got {type(context).__name__}")
        self.context = context
        self._pd = _rdma.alloc_pd(context.handle)
        self._own(_rdma.dealloc_pd, self._pd)
        self._children: weakref.WeakSet = weakref.WeakSet()
        self._regions: dict[int, tuple[int, int]] = {}
        context._adopt(self)

    @property
    def handle(self) -> int:
        self._check_open()
        return self._pd

    def regions(self) -> dict[int, tuple[int, int]]:
        """``{lkey: (addr, length)}`` of the live regions (what :class:`~monarch_cy._rdma.WorkBatch` checks)."""
        return dict(self._regions)

    def register(self, buffer: object, *, writable: bool = True,
                 access: int | None = None) -> "MemoryRegion":
        """Register ``buffer`` (pinned until the region closes)."""
        pin = pin_buffer(buffer, writable)
        try:
            if access is None:
                access = _rdma.ACCESS_RDMA if writable else _rdma.ACCESS_REMOTE_READ
            return MemoryRegion(self, pin.address, pin.nbytes, access, pin=pin, kind="host")
        except BaseException:
            pin.release()
            raise

    def register_address(self, addr: int, nbytes: int, *, keepalive: Any = None,
                         access: int | None = None, kind: str = "host") -> "MemoryRegion":
        """Register ``nbytes`` at ``addr``; the caller keeps that memory allocated until close."""
        addr = _int_arg("addr", addr, 1, (1 << 64) - 1)
        nbytes = _int_arg("nbytes", nbytes, 1, (1 << 63) - 1)
        return MemoryRegion(self, addr, nbytes, access, keepalive=keepalive, kind=kind)

    def register_dmabuf(self, fd: int, offset: int, nbytes: int, iova: int, *,
                        keepalive: Any = None, access: int | None = None) -> "MemoryRegion":
        """Register ``nbytes`` at ``offset`` of dma-buf ``fd`` as address ``iova`` (fd stays the caller's)."""
        self._check_open()
        mr, lkey, rkey = _rdma.reg_dmabuf_mr(self._pd, offset, nbytes, iova, fd,
                                             _rdma.ACCESS_RDMA if access is None else access)
        return MemoryRegion._adopt_registered(self, mr, lkey, rkey, iova, nbytes, keepalive, "device")

    def register_device(self, ptr: int, nbytes: int, *,
                        get_dmabuf_fd: Callable[[int, int], int] | None = None,
                        keepalive: Any = None, access: int | None = None) -> "MemoryRegion":
        """Register GPU memory: dma-buf first (if ``get_dmabuf_fd``), then the pointer itself."""
        ptr = _int_arg("ptr", ptr, 1, (1 << 64) - 1)
        nbytes = _int_arg("nbytes", nbytes, 1, (1 << 63) - 1)
        self._check_open()
        tried = []
        if get_dmabuf_fd is None:
            tried.append("dma-buf: no exporter given (the GPU runtime's memGetDmaBufFd)")
        else:
            try:
                fd = get_dmabuf_fd(ptr, nbytes)
            except Exception as e:  # noqa: BLE001 - reported below with the fallback's failure
                tried.append(f"dma-buf export: {e}")
            else:
                try:
                    return self.register_dmabuf(fd, 0, nbytes, ptr, keepalive=keepalive, access=access)
                except VerbsError as e:
                    tried.append(f"ibv_reg_dmabuf_mr: {e}")
                finally:
                    os.close(fd)
        try:
            return MemoryRegion(self, ptr, nbytes, access, keepalive=keepalive, kind="device")
        except VerbsError as e:
            tried.append(f"ibv_reg_mr on the device pointer (peer memory): {e}")
            status = e.status
        raise VerbsError(
            status, "GPU_MEMORY_NOT_REGISTRABLE",
            f"cannot register {nbytes} bytes of GPU memory at {ptr:#x} for RDMA; tried: "
            + "; ".join(tried)
            + " (needs a kernel and driver with dma-buf support, or a peer-memory module)",
            "register_device")

    def _adopt(self, child: Owned) -> None:
        self._children.add(child)

    def _before_close(self) -> None:
        # Queue pairs before regions: no request may reference a deregistered region.
        children = list(self._children)
        for child in sorted(children, key=lambda c: not hasattr(c, "qp_num")):
            child.close()


class MemoryRegion(Owned):
    """``length`` bytes at ``addr`` registered in a protection domain.

    ``lkey`` names it in local work requests; :meth:`remote` is what a peer
    needs to read or write it.  Closing deregisters it (and unpins a buffer).
    """

    __slots__ = ("pd", "addr", "length", "lkey", "rkey", "kind", "_mr", "_keepalive")

    def __init__(self, pd: ProtectionDomain, addr: int, length: int, access: int | None, *,
                 pin: BufferPin | None = None, keepalive: Any = None, kind: str = "host") -> None:
        super().__init__()
        if access is None:
            access = _rdma.ACCESS_RDMA
        mr, lkey, rkey = _rdma.reg_mr(pd.handle, addr, length, access)
        self._setup(pd, mr, lkey, rkey, addr, length, keepalive if pin is None else pin, kind)
        self._own(_release_region, mr, pin)

    @classmethod
    def _adopt_registered(cls, pd, mr, lkey, rkey, addr, length, keepalive, kind) -> "MemoryRegion":
        self = cls.__new__(cls)
        Owned.__init__(self)
        self._setup(pd, mr, lkey, rkey, addr, length, keepalive, kind)
        self._own(_release_region, mr, None)
        return self

    def _setup(self, pd, mr, lkey, rkey, addr, length, keepalive, kind) -> None:
        self.pd = pd
        self._mr = mr
        self.lkey = lkey
        self.rkey = rkey
        self.addr = addr
        self.length = length
        self.kind = kind
        self._keepalive = keepalive
        pd._regions[lkey] = (addr, length)
        pd._adopt(self)

    def remote(self) -> RemoteRegion:
        """The record a peer needs to reach this memory."""
        self._check_open()
        return RemoteRegion(self.addr, self.length, self.rkey)

    def local(self, offset: int = 0, length: int | None = None) -> tuple[int, int, int]:
        """``(addr, lkey, length)`` of ``[offset, offset+length)`` of this region, checked."""
        self._check_open()
        if length is None:
            length = self.length - offset
        if offset < 0 or length < 1 or offset + length > self.length:
            raise ValueError(
                f"local range [{offset}, {offset + length}) is outside the {self.length}-byte region")
        return self.addr + offset, self.lkey, length

    def _before_close(self) -> None:
        self.pd._regions.pop(self.lkey, None)
        self._keepalive = None

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"lkey {self.lkey:#x} rkey {self.rkey:#x}"
        return f"<MemoryRegion {self.kind} {self.length} bytes at {self.addr:#x}, {state}>"
