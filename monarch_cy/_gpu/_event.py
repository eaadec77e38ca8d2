"""Events: points in a stream's work that the host or other streams can wait on."""

from __future__ import annotations

from monarch_cy._gpu._device import Device, as_device, on_device, shim
from monarch_cy._gpu._registry import provide
from monarch_cy._gpu._stream import Stream, stream_handle
from monarch_cy._resource import Owned


@provide
class Event(Owned):
    """An event on one device.

    Args:
        timing: record timestamps (needed by :meth:`elapsed_ms`); costs a little.
        blocking: :meth:`synchronize` sleeps instead of spinning.
        interprocess: may be shared with other processes; requires ``timing=False``.
    """

    def __init__(
        self,
        device: Device | int | None = None,
        *,
        timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
    ) -> None:
        super().__init__()
        if interprocess and timing:
            raise ValueError("interprocess=True requires timing=False (the runtimes refuse both)")
        self.device = as_device(device)
        self.timing = bool(timing)
        rt = shim()
        flags = 0 if timing else rt.EVENT_DISABLE_TIMING
        if blocking:
            flags |= rt.EVENT_BLOCKING_SYNC
        if interprocess:
            flags |= rt.EVENT_INTERPROCESS
        with on_device(self.device.ordinal):
            self.handle = rt.eventCreateWithFlags(flags)
        self._own(rt.eventDestroy, self.handle)
        self._recorded = False
        self.device.adopt(self)

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<Event {self.handle:#x} on device {self.device.ordinal}{state}>"

    def record(self, stream: Stream | None = None) -> "Event":
        """Record on ``stream`` (default: the legacy default stream); returns self."""
        self._check_open()
        shim().eventRecord(self.handle, stream_handle(stream))
        self._recorded = True
        return self

    def synchronize(self) -> None:
        """Block until the work before the last record is done (GIL released)."""
        self._check_open()
        shim().eventSynchronize(self.handle)

    def query(self) -> bool:
        """``True`` when the work before the last record is done; never blocks."""
        self._check_open()
        return shim().eventQuery(self.handle)

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to ``end``; both need ``timing=True``."""
        self._check_open()
        end._check_open()
        if not (self.timing and end.timing):
            raise ValueError("elapsed_ms needs two events created with timing=True")
        if not (self._recorded and end._recorded):
            raise ValueError("elapsed_ms needs both events recorded first")
        return shim().eventElapsedTime(self.handle, end.handle)

