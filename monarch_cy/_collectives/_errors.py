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
"""

from __future__ import annotations

from monarch_cy._errors import MonarchCyError, ResourceClosedError

__all__ = [
    "NcclError",
    "NcclUnavailable",
    "CollectiveError",
    "CollectiveTimeout",
    "GroupAbortedError",
    "RESULT_NAMES",
]

# ncclResult_t: the same values in NCCL and RCCL (proved by mcy_nccl_names.h).
RESULT_NAMES = {
    0: "ncclSuccess",
    1: "ncclUnhandledCudaError",
    2: "ncclSystemError",
    3: "ncclInternalError",
    4: "ncclInvalidArgument",
    5: "ncclInvalidUsage",
    6: "ncclRemoteError",
    7: "ncclInProgress",
    8: "ncclTimeout",
}


class NcclError(MonarchCyError):
    """An NCCL/RCCL call failed.

    Attributes:
        result: the numeric ``ncclResult_t``.
        name: its name (``ncclInvalidUsage``), ``"nccl result N"`` if unknown.
        message: ``ncclGetErrorString`` for the result.
        last_error: ``ncclGetLastError`` text at the time (may be ``""``).
        call: the failing function without its prefix (``"CommInitRank"``).
    """

    def __init__(self, result: int, message: str = "", last_error: str = "", call: str = "") -> None:
        self.result = int(result)
        self.name = RESULT_NAMES.get(self.result, f"nccl result {self.result}")
        self.message = str(message)
        self.last_error = str(last_error)
        self.call = str(call)
        where = f"nccl{call}: " if call else ""
        text = f"{where}{self.name} ({self.result})"
        if self.message:
            text += f": {self.message}"
        if self.last_error:
            text += f" (last error: {self.last_error})"
        super().__init__(text)

    def __reduce__(self):
        return (type(self), (self.result, self.message, self.last_error, self.call))


class NcclUnavailable(MonarchCyError, RuntimeError):
    """No usable NCCL/RCCL library.  ``tried`` lists every place looked at, in order."""

    def __init__(self, message: str, tried: tuple[str, ...] = ()) -> None:
        self.message = str(message)
        self.tried = tuple(tried)
        text = self.message
        if self.tried:
            text += "\nPlaces tried, in order:\n" + "\n".join(f"  - {t}" for t in self.tried)
        super().__init__(text)

    def __reduce__(self):
        return (type(self), (self.message, self.tried))


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
