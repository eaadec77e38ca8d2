"""Streams: ordered queues of device work, owned or borrowed (torch's)."""

from __future__ import annotations

from typing import Any

from monarch_cy._checks import is_int
from monarch_cy._gpu._device import Device, as_device, on_device, shim
from monarch_cy._gpu._registry import CLASSES, provide
from monarch_cy._resource import Owned


@provide
class Stream(Owned):
    """A stream on one device.

    ``Stream(device, non_blocking=True)`` creates and owns one (non-blocking
    streams do not synchronise with the legacy default stream).  Borrowed
    streams (:meth:`wrap`, :meth:`from_torch`, :meth:`null`) are never destroyed
    by us; ``close()`` only stops this object from using them.
    """

    def __init__(self, device: Device | int | None = None, non_blocking: bool = True) -> None:
        super().__init__()
        self.device = as_device(device)
        rt = shim()
        flags = rt.STREAM_NON_BLOCKING if non_blocking else rt.STREAM_DEFAULT
        with on_device(self.device.ordinal):
            self.handle = rt.streamCreateWithFlags(flags)
        self._own(rt.streamDestroy, self.handle)
        self._borrowed_from: Any = None
        self.device.adopt(self)

    @classmethod
    def wrap(cls, handle: int, device: Device | int | None = None, owner: Any = None) -> "Stream":
        """Borrow a stream someone else made; ``owner`` is kept alive meanwhile."""
        if not is_int(handle) or handle < 0:
            raise ValueError(f"handle must be a non-negative int stream handle, got {handle!r}")
        self = cls.__new__(cls)
        Owned.__init__(self)
        self.device = as_device(device)
        self.handle = handle
        self._borrowed_from = owner
        return self

    @classmethod
    def null(cls, device: Device | int | None = None) -> "Stream":
        """The legacy default stream (handle 0) of ``device``."""
        return cls.wrap(0, device)

    @classmethod
    def from_torch(cls, torch_stream: Any) -> "Stream":
        """Borrow a ``torch.cuda.Stream`` (works for ROCm builds of torch too)."""
        handle = getattr(torch_stream, "cuda_stream", None)
        if not isinstance(handle, int):
            raise TypeError(f"torch_stream must be a torch.cuda.Stream, got {torch_stream!r}")
        return cls.wrap(handle, torch_stream.device.index, owner=torch_stream)

    def to_torch(self):
        """This stream as a ``torch.cuda.ExternalStream`` (borrowing; keep ``self`` alive)."""
        import torch  # import time: torch is imported only by the interop calls

        self._check_open()
        return torch.cuda.ExternalStream(self.handle, device=f"cuda:{self.device.ordinal}")

    @property
    def borrowed(self) -> bool:
        return self._finalizer is None

    def __cuda_stream__(self) -> tuple[int, int]:
        """The CUDA stream protocol: ``(version, handle)``."""
        self._check_open()
        return (0, self.handle)

    def __repr__(self) -> str:
        kind = "borrowed " if self.borrowed else ""
        state = " closed" if self.closed else ""
        return f"<{kind}Stream {self.handle:#x} on device {self.device.ordinal}{state}>"

    def synchronize(self) -> None:
        """Block until all work enqueued so far is done (GIL released meanwhile)."""
        self._check_open()
        shim().streamSynchronize(self.handle)

    def query(self) -> bool:
        """``True`` when all work enqueued so far is done; never blocks."""
        self._check_open()
        return shim().streamQuery(self.handle)

    def wait_event(self, event) -> None:
        """Make later work on this stream wait for ``event``; does not block the host."""
        self._check_open()
        event._check_open()
        shim().streamWaitEvent(self.handle, event.handle, 0)

    def record_event(self, **event_kwargs):
        """Create an event on this stream's device and record it here."""
        ev = CLASSES["Event"](device=self.device, **event_kwargs)   # defined above (_registry)
        ev.record(self)
        return ev


def stream_handle(stream: "Stream | None") -> int:
    """The raw handle for an optional stream argument (0: legacy default stream)."""
    if stream is None:
        return 0
    if not isinstance(stream, Stream):
        raise TypeError(f"stream must be a monarch_cy.gpu.Stream or None, got {stream!r}")
    stream._check_open()
    return stream.handle

