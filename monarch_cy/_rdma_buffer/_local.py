"""Local memory as a byte span: what a buffer registers and what reads/writes use.

:func:`as_span` turns user memory into a :class:`Span` -- ``nbytes`` bytes at
``addr``, on the CPU (``device is None``) or on GPU ``device`` -- without copying.
Accepted (as Monarch: the memory is seen as one flat run of bytes):

* torch tensors, CPU or CUDA/ROCm, **contiguous** (any dtype and shape; Monarch
  accepts only 1-D ones, we accept every contiguous tensor as its bytes);
* ``memoryview`` and buffer-protocol objects (numpy arrays, ``bytearray``, ``bytes``
  -- read-only then), **C-contiguous**;
* ``monarch_cy.gpu`` memory objects (``DeviceBuffer``, ``DeviceMemory``,
  ``PinnedBuffer``, ``HostMemory``...), **open** (a closed one's memory is freed).

Non-contiguous memory is refused with ``ValueError`` naming the parameter, its
shape and strides: we never make a silent contiguous copy (a write into a copy
would be lost).  Call ``.contiguous()`` yourself when a copy is what you want.

The span keeps what it was made from alive (``keep``); it frees nothing.

:func:`move_guard` notices, for a registered span, that the memory went away under
it although its object is alive: a torch storage reallocated (``resize_()`` that
grows it, ``untyped_storage().resize_()``) or a ``monarch_cy.gpu`` object closed.
Buffer exporters (numpy, ``bytearray``) are pinned and cannot move.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from monarch_cy._errors import ResourceClosedError

__all__ = ["Span", "as_span", "move_guard"]


@dataclass(frozen=True)
class Span:
    addr: int
    nbytes: int
    device: int | None        # None: host memory; else the GPU ordinal in this process
    readonly: bool
    keep: Any                  # the object whose memory this is (kept alive)

    @property
    def on_gpu(self) -> bool:
        return self.device is not None

    @property
    def kind(self) -> str:
        return "cpu" if self.device is None else "gpu"


def _torch_span(t, param: str, writable: bool) -> Span:
    if not t.is_contiguous():
        raise ValueError(
            f"{param} must be a contiguous tensor; got shape {tuple(t.shape)} with strides "
            f"{tuple(t.stride())} (RDMA moves raw bytes and never copies silently: pass "
            f"{param}.contiguous() and copy back yourself if that is what you want)")
    n = t.numel() * t.element_size()
    if t.device.type == "cuda":
        return Span(t.data_ptr(), n, t.device.index if t.device.index is not None else 0,
                    False, t)
    if t.device.type != "cpu":
        raise ValueError(f"{param} is a tensor on {t.device}; only cpu and cuda tensors work")
    return Span(t.data_ptr(), n, None, False, t)


def _gpu_memory_class():
    """The base class of monarch_cy.gpu's memory objects, or None while the GPU layer
    is not loaded (then nothing is one of them, and host memory loads no GPU code)."""
    if "monarch_cy._gpu" not in sys.modules:
        return None
    from monarch_cy._gpu._memory import Memory  # import time: only once the GPU layer is loaded
    return Memory


def _gpu_memory_span(m, param: str) -> Span:
    if m.closed:
        raise ResourceClosedError(
            f"{param} is a closed {type(m).__name__}: its memory was freed and cannot be "
            "registered, read or written")
    dev = m.device.ordinal if getattr(m, "kind", "host") == "device" else None
    return Span(m.ptr, m.nbytes, dev, bool(getattr(m, "readonly", False)), m)


def _buffer_span(obj, param: str, writable: bool) -> Span:
    try:
        mv = obj if isinstance(obj, memoryview) else memoryview(obj)
    except TypeError:
        raise TypeError(
            f"{param} must be a torch tensor, a memoryview or a buffer (numpy array, "
            f"bytearray), or a monarch_cy.gpu memory object; got {type(obj).__name__}") from None
    if not mv.c_contiguous:
        raise ValueError(
            f"{param} must be C-contiguous memory; got a view of shape {mv.shape} with strides "
            f"{mv.strides} (RDMA never copies silently: make a contiguous copy yourself)")
    if mv.readonly and writable:
        raise ValueError(f"{param} is read-only memory ({type(obj).__name__}); it cannot be "
                         "written into")
    readonly = bool(mv.readonly)
    if mv is not obj:
        mv.release()          # only used for the checks; the pin holds obj's buffer
    from monarch_cy._hostmem import BufferPin
    pin = BufferPin(obj, not readonly)
    return Span(pin.address, pin.nbytes, None, readonly, _Pinned(pin, obj))


class _Pinned:
    """Keeps a buffer exporter pinned; :meth:`release` lets it go (idempotent)."""

    __slots__ = ("pin", "obj")

    def __init__(self, pin, obj):
        self.pin, self.obj = pin, obj

    def release(self) -> None:
        if self.pin is not None:
            self.pin.release()
            self.pin = self.obj = None


def as_span(obj: Any, param: str, writable: bool) -> Span:
    """A :class:`Span` over ``obj``'s memory (see the module docstring).

    ``writable``: the memory will be written (a read destination).  ``param`` names
    the argument in error messages.
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch_span(obj, param, writable)
    gpu_memory = _gpu_memory_class()
    if gpu_memory is not None and isinstance(obj, gpu_memory):
        span = _gpu_memory_span(obj, param)
        if writable and span.readonly:
            raise ValueError(f"{param} is read-only memory; it cannot be written into")
        return span
    if isinstance(obj, (str, int, float)) or obj is None:
        raise TypeError(
            f"{param} must be a torch tensor, a memoryview or a buffer (numpy array, "
            f"bytearray), or a monarch_cy.gpu memory object; got {type(obj).__name__} {obj!r}")
    return _buffer_span(obj, param, writable)


class _StorageGuard:
    """A torch tensor's storage (held: ``set_()`` on the tensor cannot free it) and
    where the registered span sat in it."""

    __slots__ = ("storage", "base", "need", "addr", "nbytes")

    def __init__(self, t, span: Span):
        self.storage = t.untyped_storage()
        self.base = self.storage.data_ptr()
        self.need = span.addr + span.nbytes - self.base
        self.addr, self.nbytes = span.addr, span.nbytes

    def moved(self) -> str | None:
        p, n = self.storage.data_ptr(), self.storage.nbytes()
        if p == self.base and n >= self.need:
            return None
        return (f"the registered tensor's memory moved or shrank since registration (its "
                f"storage was {self.need}+ bytes at {self.base:#x}, now {n} bytes at {p:#x}: "
                "resize_() of a registered tensor or its storage?); the registered bytes "
                f"[{self.addr:#x}, +{self.nbytes}) may be freed")


class _ClosedGuard:
    __slots__ = ("mem",)

    def __init__(self, mem):
        self.mem = mem

    def moved(self) -> str | None:
        if not self.mem.closed:
            return None
        return f"the registered {type(self.mem).__name__} was closed: its memory was freed"


def move_guard(span: Span):
    """An object whose ``moved()`` is None while ``span``'s memory is still where it was
    registered, else why not (see the module docstring); None when it cannot move."""
    torch = sys.modules.get("torch")
    keep = span.keep
    if torch is not None and isinstance(keep, torch.Tensor):
        return _StorageGuard(keep, span)
    gpu_memory = _gpu_memory_class()
    if gpu_memory is not None and isinstance(keep, gpu_memory):
        return _ClosedGuard(keep)
    return None
