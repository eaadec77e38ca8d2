"""Errors of remote hosts and scheduler jobs (all :class:`MonarchCyError`, picklable).

Defined in :mod:`monarch_cy._errors`, the one home of the exception tree; this is
their documented home and their ``__module__``."""

from __future__ import annotations

from monarch_cy._errors import (HostError, HostLostError, HostRefusedError,  # noqa: F401
                                HostUnreachableError, SchedulerError)

__all__ = ["HostError", "HostUnreachableError", "HostRefusedError", "HostLostError",
           "SchedulerError"]
