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
import nothing above themselves.  It is the one home of every error and warning
class; :mod:`monarch_cy.errors` is their one public face and every class's
``__module__`` (pickles and tracebacks name ``monarch_cy.errors.ActorError``, the
module users import it from); the public packages of the subsystems (``actor``,
``rdma``, ``collectives``, ``job``, ``gpu``) re-export theirs.
"""

from __future__ import annotations

__all__ = [
    "MonarchCyError",
    "GpuRuntimeError",
    "OutOfMemoryError",
    "NoDeviceError",
    "GpuRuntimeUnavailable",
    "UnprovenRuntimeWarning",
    "ResourceClosedError",
    "VerbsError",
    "VerbsUnavailable",
    "VerbsTimeout",
    "NcclError",
    "NcclUnavailable",
    "NCCL_RESULT_NAMES",
    "ActorError",
    "SupervisionError",
    "MeshStoppedError",
    "MeshIndexError",
    "ForeignJobError",
    "StackDumpError",
    "DebugIOError",
    "MachineError",
    "ConfigValueError",
    "MessageTooLargeError",
    "ModuleNotProvidedError",
    "NameNotProvidedError",
    "CollectiveError",
    "CollectiveTimeout",
    "GroupAbortedError",
    "HostError",
    "HostUnreachableError",
    "HostRefusedError",
    "HostLostError",
    "SchedulerError",
    "RDMAError",
    "BufferDroppedError",
    "RDMATimeoutError",
    "BackendUnavailableError",
    "RdmaInitError",
    "OwnerDiedError",
    "RDMATcpFallbackWarning",
    "RDMAReadTransferWarning",
    "RDMAWriteTransferWarning",
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


class UnprovenRuntimeWarning(UserWarning):
    """The bound GPU runtime is a release CI has not proven the shim's tables against.

    It still binds, with the table of its release line (the vendors keep these
    values stable within a major release); the message names the runtime's
    version, the table and the nearest release that is proven.  Emitted once
    per process, when the runtime is bound.
    """


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

    def __init__(self, message: str, tried: tuple[str, ...] = ()) -> None:
        self.message = str(message)
        self.tried = tuple(tried)
        text = self.message
        if self.tried:
            text += "\nPlaces tried, in order:\n" + "\n".join(f"  - {t}" for t in self.tried)
        super().__init__(text)

    def __reduce__(self):
        return (type(self), (self.message, self.tried))


# -- the actor model ---------------------------------------------------------------

class ActorError(MonarchCyError):
    """An endpoint raised: carries the remote exception and its formatted traceback.

    The actor that raised keeps serving; only this call failed.  The text is
    Monarch's: ``Actor call <mesh>.<endpoint> failed.`` then the remote traceback
    headed "Traceback of where the remote call failed".

    Attributes:
        exception: the remote exception object when it could be pickled, else None.
        message: the first line (Monarch's ``ActorError.message``).
        exception_formatted: the remote traceback as Monarch words it.
        remote_traceback: the remote traceback as text (always present).
        actor: name of the actor mesh, ``rank``: the actor's rank in it (or None).
        endpoint: the endpoint name that raised.
    """

    def __init__(self, exception, remote_traceback: str, actor: str = "", rank=None,
                 endpoint: str = "") -> None:
        self.exception = exception
        self.remote_traceback = str(remote_traceback)
        self.actor = str(actor)
        self.rank = rank
        self.endpoint = str(endpoint)
        where = f"{actor}.{endpoint}" if actor else endpoint
        self.message = f"Actor call {where} failed." if where else \
            "A remote actor call has failed."
        if exception is None:       # not picklable: the last traceback line names it
            self.message += " (the exception could not be pickled; its text follows)"
        self.exception_formatted = self.remote_traceback.replace(
            "Traceback (most recent call last):",
            "Traceback of where the remote call failed (most recent call last):")
        super().__init__(f"{self.message}\n {self.exception_formatted}")

    def __reduce__(self):
        return (type(self), (self.exception, self.remote_traceback, self.actor, self.rank,
                             self.endpoint))


def _indent(text: str) -> str:
    return "  " + str(text).rstrip("\n").replace("\n", "\n  ")


class SupervisionError(MonarchCyError, RuntimeError):
    """An actor or its process failed (died, was stopped, or failed to start).

    Pending calls on a failed actor end with this error rather than hanging; later
    calls raise it at once.  The text is Monarch's: ``The actor <who> and all its
    descendants have failed:`` and the cause indented, preceded by ``Endpoint call
    <mesh>.<endpoint>() failed, `` when a call raised it (``args`` is ``(that body,
    "<mesh>.<endpoint>()")``, as Monarch's).

    Attributes: ``actor`` (mesh name), ``rank`` (rank of the failed actor or proc, or
    None), ``cause`` (text: exit status, signal, or reason), ``endpoint``
    (``"<mesh>.<endpoint>()"`` of the call that raised it, or None; settable, as
    Monarch's), ``who`` (how the failed actor is named in the text).
    """

    def __init__(self, actor: str, rank, cause: str, endpoint: str | None = None,
                 who: str | None = None, during: str | None = None) -> None:
        self.actor = str(actor)
        self.rank = rank
        self.cause = str(cause)
        self.who = str(who) if who else (f"{self.actor}[{self.rank}]"
                                          if self.rank is not None else self.actor)
        # the report of the failure this one happened while handling (Monarch's
        # "This error occurred while handling another failure:"), or None
        self.during = None if during is None else str(during)
        super().__init__(self._text(), endpoint)
        self.endpoint = endpoint

    @property
    def endpoint(self) -> str | None:
        return self.args[1] if len(self.args) > 1 else None

    @endpoint.setter
    def endpoint(self, value: str | None) -> None:
        self.args = (self.args[0] if self.args else self._text(), value)

    def _text(self) -> str:
        text = f"The actor {self.who} and all its descendants have failed:\n" \
               f"{_indent(self.cause)}"
        if self.cause.endswith("\n"):
            text += "\n"            # a traceback's last newline stays, as Monarch's
        if self.during is not None:
            text += f"\nThis error occurred while handling another failure:\n" \
                    f"{_indent(self.during)}\n"
        return text

    def __str__(self) -> str:
        body = self.args[0] if self.args else self._text()
        ep = self.endpoint
        return f"Endpoint call {ep} failed, {body}" if ep else body

    def __reduce__(self):
        args = (self.actor, self.rank, self.cause, self.endpoint, self.who)
        if self.during is not None:        # (subclasses take the first five only)
            args += (self.during,)
        return (type(self), args)


class MeshStoppedError(SupervisionError):
    """The proc mesh (or the actor mesh) was stopped; calls on its actors are refused
    (Monarch's text: ``Supervision event: actor <who> has status: stopped: ...``)."""

    def _text(self) -> str:
        return f"Supervision event: actor {self.who} has status:\n" \
               f"{_indent('stopped: ' + self.cause)}"


class MeshIndexError(MonarchCyError, IndexError, ValueError):
    """A mesh slice or coordinate is out of range or names an unknown dimension.

    Subclasses both ``IndexError`` and ``ValueError``.
    """

    def __init__(self, message: str) -> None:
        self.message = str(message)
        super().__init__(self.message)

    def __reduce__(self):
        return (type(self), (self.message,))


class ForeignJobError(MonarchCyError, ValueError):
    """A handle (mesh, port, buffer) made by another job was unpickled or used here.

    Handles carry a fingerprint of the job secret that made them; a process of any
    other job refuses them with this error instead of sending to addresses that
    mean something else here.
    """

    def __init__(self, message: str) -> None:
        self.message = str(message)
        super().__init__(self.message)

    def __reduce__(self):
        return (type(self), (self.message,))


# -- collectives ------------------------------------------------------------------

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


class StackDumpError(MonarchCyError, RuntimeError):
    """Stacks could not be read (``dump_stacks``, ``monarch-cy stacks``): py-spy is
    missing or may not attach to the proc (ptrace permissions), or no job answered;
    the message says which and what to do."""


class DebugIOError(MonarchCyError, RuntimeError):
    """The debugger's io failed (its user went away); Monarch's name and text."""

    def __init__(self, message: str = "Error encountered during debugger I/O "
                                      "operation.") -> None:
        super().__init__(message)


# -- remote hosts and scheduler jobs ----------------------------------------------

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


# -- RDMA buffers -----------------------------------------------------------------

class RDMAError(MonarchCyError):
    """Base of the errors of ``monarch_cy.rdma``; ``message`` is the text."""

    def __init__(self, message: str) -> None:
        self.message = str(message)
        super().__init__(self.message)

    def __reduce__(self):
        return (type(self), (self.message,))


class BufferDroppedError(RDMAError, ValueError):
    """The buffer was dropped (by its owner or through any copy of its handle);
    its memory may already be reused, so nothing reads or writes it any more."""


class RDMATimeoutError(RDMAError, TimeoutError):
    """An operation did not complete within its ``timeout``.  What it wrote into the
    destination so far is unspecified."""


class BackendUnavailableError(RDMAError, ValueError):
    """The backend asked for (argument or ``MONARCH_CY_RDMA_BACKEND``) cannot serve this
    pair of processes or memories; the message says why."""


class RdmaInitError(RDMAError, RuntimeError):
    """RDMA could not be set up in this process as configured (Monarch's name): a
    malformed ``rdma_ibverbs_target`` (``MONARCH_CY_RDMA_IBVERBS_TARGET``).  Raised by
    ``RDMABuffer(...)`` and ``RDMAAction.submit()``; the message names the setting
    and the value."""


class OwnerDiedError(SupervisionError):
    """The process owning the buffer died before (or while) the operation ran.

    A :class:`~monarch_cy.actor.SupervisionError`: ``actor`` is ``"rdma-buffer
    owner"``, ``rank`` None, ``cause`` says which process and why.
    """

    def __init__(self, actor: str = "rdma-buffer owner", rank=None, cause: str = "",
                 endpoint: str | None = None, who: str | None = None) -> None:
        super().__init__(actor, rank, cause, endpoint, who)


class RDMATcpFallbackWarning(UserWarning):
    """Monarch's name: a transfer uses the TCP fallback (no verbs device, no same-host
    path).  Emitted once per process, at the first such transfer."""


class RDMAReadTransferWarning(UserWarning):
    """Monarch's name (Monarch 0.7.0 defines it and never emits it; neither do we)."""


class RDMAWriteTransferWarning(UserWarning):
    """Monarch's name (Monarch 0.7.0 defines it and never emits it; neither do we)."""


class MachineError(MonarchCyError, ValueError):
    """Valid training options that this machine cannot satisfy: ``--device gpu`` with
    no GPU found, or more ``--procs`` than GPUs when procs run on GPUs.  ``monarch-cy
    train`` exits 3 for it, 2 for every other ``ValueError`` of
    ``TrainConfig.validate``."""



class ConfigValueError(MonarchCyError, TypeError, ValueError):
    """A value of the wrong type, or out of range, for a configuration key
    (``monarch_cy.config.configure``); a ``TypeError`` as Monarch raises, and a
    ``ValueError``."""


class MessageTooLargeError(MonarchCyError, ValueError):
    """A message (its pickle and buffers together) is larger than this process may
    send (``MONARCH_CY_MAX_MESSAGE_BYTES``, Monarch's ``codec_max_frame_length``).
    Nothing was sent.  ``size`` and ``limit`` are the byte counts; the text is
    Monarch's ``rejecting oversize frame: len=... > max=...``.  A call whose
    arguments are too large fails with ``SupervisionError`` carrying this text."""

    def __init__(self, size: int, limit: int) -> None:
        self.size, self.limit = int(size), int(limit)
        super().__init__(f"rejecting oversize frame: len={self.size} > max={self.limit}; "
                         "increase CODEC_MAX_FRAME_LENGTH (monarch.config's "
                         "codec_max_frame_length) to allow")

    def __reduce__(self):
        return (type(self), (self.size, self.limit))


class ModuleNotProvidedError(MonarchCyError, ModuleNotFoundError):
    """Under :mod:`monarch_cy.compat`: a ``monarch.*`` module that monarch_cy does not
    provide (the message names it and points to docs/monarch-compat.md)."""


class NameNotProvidedError(MonarchCyError, ImportError):
    """Under :mod:`monarch_cy.compat`: ``from monarch.X import Y`` where monarch_cy
    provides ``monarch.X`` but not ``Y`` (yet)."""


# Every class's public face: tracebacks and pickles name the module users import it
# from (monarch_cy.errors re-exports each one).
PUBLIC_HOME = "monarch_cy.errors"
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = PUBLIC_HOME
del _name, _obj
