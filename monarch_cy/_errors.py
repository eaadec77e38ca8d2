"""The exception tree of monarch_cy.

Every error monarch_cy raises on its own account derives from
:class:`MonarchCyError`.  Errors travel between processes of a mesh, so each one
survives ``pickle`` round trips with its attributes intact (``__reduce__`` below
rebuilds them from the constructor arguments, never from ``args`` guesses).

Where a builtin names the same failure, the error also subclasses it
(``OutOfMemoryError`` is a ``MemoryError``), so ``except MemoryError`` keeps
working for code that does not know monarch_cy.

This module is flat: it imports nothing of monarch_cy, so the flat Cython tiers
(``_hip_shim``, ``_nccl_shim``, ``_rdma``) raise the errors defined here and
import nothing above themselves.  Errors whose documented home is a subsystem
are defined here and re-exported there: the verbs errors (:mod:`monarch_cy._verbs`)
and the NCCL errors, whose ``__module__`` stays :mod:`monarch_cy._collectives._errors`
(their public home, ``monarch_cy.collectives``; pickles and tracebacks name it).
"""

from __future__ import annotations

__all__ = [
    "MonarchCyError",
    "GpuRuntimeError",
    "OutOfMemoryError",
    "NoDeviceError",
    "GpuRuntimeUnavailable",
    "ResourceClosedError",
    "VerbsError",
    "VerbsUnavailable",
    "VerbsTimeout",
    "NcclError",
    "NcclUnavailable",
    "NCCL_RESULT_NAMES",
]


class MonarchCyError(Exception):
    """Base class of every error monarch_cy raises on its own account."""


class GpuRuntimeError(MonarchCyError):
    """A call into the GPU runtime (CUDA or HIP) returned a failure status.

    Attributes:
        status: the runtime's numeric status code.
        name: the vendor's name for it (``cudaErrorInvalidValue``, ``hipErrorNoDevice``).
        message: the vendor's description, or ours where the runtime gave none.
        call: the CUDA-name of the failing call (``"Malloc"``), or ``""``.
    """

    def __init__(self, status: int, name: str, message: str, call: str = "") -> None:
        self.status = int(status)
        self.name = str(name)
        self.message = str(message)
        self.call = str(call)
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{self.name} ({self.status}): {self.message}")

    def __reduce__(self):
        return (type(self), (self.status, self.name, self.message, self.call))


class OutOfMemoryError(GpuRuntimeError, MemoryError):
    """The GPU runtime could not allocate the memory asked for."""


class NoDeviceError(GpuRuntimeError):
    """The runtime loaded, but it sees no usable device (no GPU, or no driver)."""


class GpuRuntimeUnavailable(MonarchCyError, RuntimeError):
    """No GPU runtime could be bound: none found, or GPU support switched off.

    Attributes:
        tried: every place looked at, in order, each with why it was not used.
    """

    def __init__(self, message: str, tried: tuple[str, ...] = ()) -> None:
        self.tried = tuple(tried)
        text = message
        if self.tried:
            text += "\nPlaces tried, in order:\n" + "\n".join(f"  - {t}" for t in self.tried)
        super().__init__(text)
        self.message = message

    def __reduce__(self):
        return (type(self), (self.message, self.tried))


class ResourceClosedError(MonarchCyError, ValueError):
    """An operation was attempted on a resource after its ``close()``.

    Subclasses ``ValueError`` as operations on closed files do.
    """


class VerbsError(MonarchCyError):
    """A verbs call or a work completion failed.

    Attributes:
        status: the numeric status (``ibv_wc_status`` value for completions,
            errno for calls; 0 where there is none).
        name: its symbolic name (``IBV_WC_REM_ACCESS_ERR``, ``EINVAL``).
        message: a description (libibverbs' text for completion statuses).
        call: the failing call (``ibv_reg_mr``), or ``"completion"``.
        wr_id: the work request's id for completion and posting errors, else ``None``.
    """

    def __init__(self, status: int, name: str, message: str, call: str = "",
                 wr_id: int | None = None) -> None:
        self.status = int(status)
        self.name = str(name)
        self.message = str(message)
        self.call = str(call)
        self.wr_id = None if wr_id is None else int(wr_id)
        where = f"{call}: " if call else ""
        wr = f" (wr_id {wr_id})" if wr_id is not None else ""
        super().__init__(f"{where}{self.name} ({self.status}): {self.message}{wr}")

    def __reduce__(self):
        return (type(self), (self.status, self.name, self.message, self.call, self.wr_id))


class VerbsUnavailable(VerbsError, RuntimeError):
    """Verbs cannot be used here: the message says why (library, kernel, device)."""

    def __init__(self, message: str, status: int = 0, name: str = "unavailable",
                 call: str = "", wr_id: int | None = None) -> None:
        VerbsError.__init__(self, status, name, message, call, wr_id)
        # The reason alone reads best for "why is there no RDMA here".
        self.args = (message,)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        return (type(self), (self.message, self.status, self.name, self.call, self.wr_id))


class VerbsTimeout(VerbsError, TimeoutError):
    """Work completions did not all arrive before the deadline."""


# ncclResult_t: the same values in NCCL and RCCL (proved by mcy_nccl_names.h).
NCCL_RESULT_NAMES = {
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

_NCCL_HOME = "monarch_cy._collectives._errors"      # where users import them from


class NcclError(MonarchCyError):
    """An NCCL/RCCL call failed.

    Attributes:
        result: the numeric ``ncclResult_t``.
        name: its name (``ncclInvalidUsage``), ``"nccl result N"`` if unknown.
        message: ``ncclGetErrorString`` for the result.
        last_error: ``ncclGetLastError`` text at the time (may be ``""``).
        call: the failing function without its prefix (``"CommInitRank"``).
    """

    __module__ = _NCCL_HOME

    def __init__(self, result: int, message: str = "", last_error: str = "", call: str = "") -> None:
        self.result = int(result)
        self.name = NCCL_RESULT_NAMES.get(self.result, f"nccl result {self.result}")
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

    __module__ = _NCCL_HOME

    def __init__(self, message: str, tried: tuple[str, ...] = ()) -> None:
        self.message = str(message)
        self.tried = tuple(tried)
        text = self.message
        if self.tried:
            text += "\nPlaces tried, in order:\n" + "\n".join(f"  - {t}" for t in self.tried)
        super().__init__(text)

    def __reduce__(self):
        return (type(self), (self.message, self.tried))
