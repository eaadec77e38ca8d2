"""Errors of the collectives layer; every one survives ``pickle``.

* :class:`NcclError`: an NCCL/RCCL call returned a failure result (with the
  library's name for it and ``ncclGetLastError``'s text).
* :class:`NcclUnavailable`: no NCCL/RCCL library could be loaded, or the one
  found is older than the minimum supported version (lists every place tried).
* :class:`CollectiveTimeout`: an operation did not complete in time; the
  communicator was aborted so that no kernel or thread is left spinning.
* :class:`CollectiveError`: any other failure of a group (the gloo backend's
  errors are re-raised as this, with the original text), including a peer that
  died mid-operation.
* :class:`GroupAbortedError`: the group was aborted (by ``abort()``, a timeout or
  an asynchronous error); it cannot be used again.

``NcclError``, ``NcclUnavailable`` and ``RESULT_NAMES`` are defined in the flat
:mod:`monarch_cy._errors` (the flat tier ``_nccl_shim`` raises them and may import
nothing above itself) and re-exported here, their documented home: the classes are
the same objects and keep this module as their ``__module__``.
"""

from __future__ import annotations

from monarch_cy._errors import NCCL_RESULT_NAMES as RESULT_NAMES
from monarch_cy._errors import MonarchCyError, NcclError, NcclUnavailable, ResourceClosedError

__all__ = [
    "NcclError",
    "NcclUnavailable",
    "CollectiveError",
    "CollectiveTimeout",
    "GroupAbortedError",
    "RESULT_NAMES",
]


class CollectiveError(MonarchCyError, RuntimeError):
    """A collective operation failed (a peer died, the backend reported an error).

    Attributes: ``op`` (``"all_reduce"``...), ``message`` (the backend's text).
    """

    def __init__(self, op: str, message: str) -> None:
        self.op = str(op)
        self.message = str(message)
        super().__init__(f"{self.op}: {self.message}" if self.op else self.message)

    def __reduce__(self):
        return (type(self), (self.op, self.message))


class CollectiveTimeout(CollectiveError, TimeoutError):
    """An operation did not complete within ``timeout`` seconds; the group was aborted."""

    def __init__(self, op: str, message: str, timeout: float = 0.0) -> None:
        self.timeout = float(timeout)
        super().__init__(op, message)

    def __reduce__(self):
        return (type(self), (self.op, self.message, self.timeout))


class GroupAbortedError(ResourceClosedError):
    """The group was aborted; ``reason`` says why.  Subclasses ``ResourceClosedError``."""

    def __init__(self, reason: str = "the group was aborted") -> None:
        self.reason = str(reason)
        super().__init__(self.reason)

    def __reduce__(self):
        return (type(self), (self.reason,))
