"""Public exception tree (re-exports only).

Every error monarch_cy raises on its own account derives from
:class:`MonarchCyError` (defined, with the errors of the flat tiers, in
:mod:`monarch_cy._errors`); each layer's own errors are defined in that layer and
all of them are reachable here::

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
    ├── MachineError (ValueError)       training options this machine cannot meet
    ├── RDMAError ── BufferDroppedError, RDMATimeoutError, BackendUnavailableError
    └── HostError ── HostUnreachableError, HostRefusedError, HostLostError,
                     SchedulerError

Importing this module imports no GPU library, no zmq and no torch.
"""

from monarch_cy._actor.errors import (
    ActorError,
    ForeignJobError,
    MeshIndexError,
    MeshStoppedError,
    SupervisionError,
)
from monarch_cy._collectives._errors import (
    CollectiveError,
    CollectiveTimeout,
    GroupAbortedError,
)
from monarch_cy._errors import (
    MachineError,
    GpuRuntimeError,
    GpuRuntimeUnavailable,
    MonarchCyError,
    NcclError,
    NcclUnavailable,
    NoDeviceError,
    OutOfMemoryError,
    ResourceClosedError,
    VerbsError,
    VerbsTimeout,
    VerbsUnavailable,
)
from monarch_cy._hosts.errors import (
    HostError,
    HostLostError,
    HostRefusedError,
    HostUnreachableError,
    SchedulerError,
)
from monarch_cy._rdma_buffer._errors import (
    BackendUnavailableError,
    BufferDroppedError,
    OwnerDiedError,
    RDMAError,
    RDMATimeoutError,
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
    "MachineError",
    "RDMAError",
    "BufferDroppedError",
    "RDMATimeoutError",
    "BackendUnavailableError",
    "OwnerDiedError",
    "HostError",
    "HostUnreachableError",
    "HostRefusedError",
    "HostLostError",
    "SchedulerError",
]
