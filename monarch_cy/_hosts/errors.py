"""Errors of remote hosts and scheduler jobs (all :class:`MonarchCyError`, picklable)."""

from __future__ import annotations

from monarch_cy._errors import MonarchCyError

__all__ = ["HostError", "HostUnreachableError", "HostRefusedError", "HostLostError",
           "SchedulerError"]


class HostError(MonarchCyError):
    """A remote host (its agent) cannot serve this controller."""


class HostUnreachableError(HostError, TimeoutError):
    """An agent did not answer in time (names the address and what was seen)."""


class HostRefusedError(HostError, PermissionError):
    """An agent refused the CURVE handshake: it holds a different job secret."""


class HostLostError(HostError, ConnectionError):
    """A host was connected, then lost (no heartbeat, or its connection dropped)."""


class SchedulerError(HostError, RuntimeError):
    """The scheduler (SLURM, Kubernetes) refused or ended the job; carries its message."""
