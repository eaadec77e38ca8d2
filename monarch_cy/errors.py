"""Public exception tree (re-exports only).

Every error monarch_cy raises on its own account derives from
:class:`MonarchCyError`.  Every class is defined in :mod:`monarch_cy._errors` (the
flat tiers raise them and import nothing above themselves) and this module is its
``__module__``: tracebacks and pickles name ``monarch_cy.errors.<Class>``.  The
public packages re-export their own (``monarch_cy.actor``, ``.rdma``,
``.collectives``, ``.job``, ``.gpu``)::

    MonarchCyError
    ├── GpuRuntimeError ── OutOfMemoryError (MemoryError), NoDeviceError
    ├── GpuRuntimeUnavailable (RuntimeError)
    ├── ResourceClosedError (ValueError) ── GroupAbortedError
    ├── VerbsError ── VerbsUnavailable (RuntimeError), VerbsTimeout (TimeoutError)
    ├── NcclError, NcclUnavailable (RuntimeError)
    ├── CollectiveError (RuntimeError) ── CollectiveTimeout (TimeoutError)
    ├── ActorError                      a remote endpoint raised
    ├── SupervisionError (RuntimeError) ── MeshStoppedError, OwnerDiedError
    ├── MeshIndexError (IndexError, ValueError)
    ├── ForeignJobError (ValueError)    a handle from another job
    ├── StackDumpError (RuntimeError)   stacks could not be read (py-spy, ptrace)
    ├── DebugIOError (RuntimeError)     the debugger's io failed (its user went away)
    ├── MachineError (ValueError)       training options this machine cannot meet
    ├── ConfigValueError (TypeError, ValueError)   a bad monarch_cy.config value
    ├── MessageTooLargeError (ValueError)   a message over MONARCH_CY_MAX_MESSAGE_BYTES
    ├── ModuleNotProvidedError (ModuleNotFoundError), NameNotProvidedError
    │   (ImportError)                   compat: a Monarch path or name not provided
    ├── RDMAError ── BufferDroppedError, RDMATimeoutError, BackendUnavailableError,
    │                RdmaInitError (RuntimeError)
    └── HostError ── HostUnreachableError, HostRefusedError, HostLostError,
                     SchedulerError

Warnings: ``UnprovenRuntimeWarning`` (a GPU runtime release not yet proven),
``RDMATcpFallbackWarning``, ``RDMAReadTransferWarning``, ``RDMAWriteTransferWarning``.

Importing this module imports no GPU library, no zmq and no torch.
"""

from monarch_cy._errors import (
    ActorError,
    BackendUnavailableError,
    BufferDroppedError,
    CollectiveError,
    CollectiveTimeout,
    ConfigValueError,
    ForeignJobError,
    GpuRuntimeError,
    GpuRuntimeUnavailable,
    GroupAbortedError,
    HostError,
    HostLostError,
    HostRefusedError,
    HostUnreachableError,
    MachineError,
    MeshIndexError,
    MeshStoppedError,
    MessageTooLargeError,
    ModuleNotProvidedError,
    MonarchCyError,
    NameNotProvidedError,
    NcclError,
    NcclUnavailable,
    NoDeviceError,
    OutOfMemoryError,
    OwnerDiedError,
    RDMAError,
    RDMAReadTransferWarning,
    RDMATcpFallbackWarning,
    RDMATimeoutError,
    RDMAWriteTransferWarning,
    RdmaInitError,
    ResourceClosedError,
    SchedulerError,
    StackDumpError,
    DebugIOError,
    SupervisionError,
    UnprovenRuntimeWarning,
    VerbsError,
    VerbsTimeout,
    VerbsUnavailable,
)

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
    "CollectiveError",
    "CollectiveTimeout",
    "GroupAbortedError",
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
    "RDMAError",
    "BufferDroppedError",
    "RDMATimeoutError",
    "BackendUnavailableError",
    "RdmaInitError",
    "OwnerDiedError",
    "HostError",
    "HostUnreachableError",
    "HostRefusedError",
    "HostLostError",
    "SchedulerError",
    "UnprovenRuntimeWarning",
    "RDMATcpFallbackWarning",
    "RDMAReadTransferWarning",
    "RDMAWriteTransferWarning",
]
