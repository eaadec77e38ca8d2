"""A one-shot alarm that is a file descriptor (Linux ``timerfd``, ``CLOCK_MONOTONIC``).

An :class:`Alarm` becomes readable when it goes off and stays readable (level) until
:meth:`Alarm.ack`; it can sit in any poll set, so a socket reader that blocks in
``epoll_wait`` (or a pump that polls the reader's epoll fd) wakes for a deadline with
no thread and no timeout of its own.  The unix inbox uses one to close connections
that never prove they belong to the job (:mod:`.unix_inbox`).

Python 3.13 has ``os.timerfd_create``; before that the two libc calls go through
:mod:`ctypes` (64-bit Linux: ``time_t`` is a ``long``).
"""

from __future__ import annotations

import os

__all__ = ["Alarm"]

_CLOCK_MONOTONIC = 1

if hasattr(os, "timerfd_create"):                       # Python >= 3.13
    import time

    def _create() -> int:
        return os.timerfd_create(time.CLOCK_MONOTONIC,
                                 flags=os.TFD_NONBLOCK | os.TFD_CLOEXEC)

    def _set(fd: int, delay: float) -> None:
        os.timerfd_settime(fd, initial=delay)
else:
    import ctypes

    class _Spec(ctypes.Structure):                       # struct itimerspec
        _fields_ = [("interval_s", ctypes.c_long), ("interval_ns", ctypes.c_long),
                    ("value_s", ctypes.c_long), ("value_ns", ctypes.c_long)]

    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.timerfd_create.argtypes = (ctypes.c_int, ctypes.c_int)
    _libc.timerfd_settime.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Spec),
                                      ctypes.c_void_p)

    def _check(rc: int) -> int:
        if rc < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return rc

    def _create() -> int:
        return _check(_libc.timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC))

    def _set(fd: int, delay: float) -> None:
        ns = int(delay * 1e9)
        spec = _Spec(0, 0, ns // 1_000_000_000, ns % 1_000_000_000)
        _check(_libc.timerfd_settime(fd, 0, ctypes.byref(spec), None))


class Alarm:
    """See the module docstring.  Not thread-safe: its owner's reading thread uses it."""

    __slots__ = ("fd", "at")

    def __init__(self) -> None:
        self.fd = _create()
        self.at = None                    # monotonic time it goes off, None: unset

    def fileno(self) -> int:
        return self.fd

    def set(self, at: float, now: float) -> None:
        """Go off at monotonic time ``at`` (at once if it has passed), replacing any
        earlier setting."""
        _set(self.fd, max(at - now, 1e-6))   # 0 would disarm it
        self.at = at

    def clear(self) -> None:
        """Do not go off; forget that it went off."""
        _set(self.fd, 0)
        self.at = None
        self.ack()

    def ack(self) -> None:
        """It went off: make the fd unreadable again (until the next setting)."""
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
