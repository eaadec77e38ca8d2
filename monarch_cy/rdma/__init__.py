"""monarch_cy.rdma: one-sided reads and writes of other processes' memory (Monarch's
``monarch.rdma`` API shape).

Re-exports only; the implementation lives in :mod:`monarch_cy._rdma_buffer`.  See
``docs/rdma.md``.  Importing this module imports neither torch nor zmq.
"""

from monarch_cy._errors import (BackendUnavailableError, BufferDroppedError, ForeignJobError,
                                OwnerDiedError, RDMAError, RDMAReadTransferWarning,
                                RDMATcpFallbackWarning, RDMATimeoutError,
                                RDMAWriteTransferWarning, RdmaInitError)
from monarch_cy._rdma_buffer._action import RDMAAction
from monarch_cy._rdma_buffer._availability import (get_rdma_backend, is_ibverbs_available,
                                                   is_rdma_available)
from monarch_cy._rdma_buffer._buffer import RDMABuffer

__all__ = [
    "RDMAAction",
    "RDMABuffer",
    "RDMAError",
    "BackendUnavailableError",
    "BufferDroppedError",
    "ForeignJobError",
    "OwnerDiedError",
    "RdmaInitError",
    "RDMATimeoutError",
    "RDMATcpFallbackWarning",
    "RDMAReadTransferWarning",
    "RDMAWriteTransferWarning",
    "get_rdma_backend",
    "is_ibverbs_available",
    "is_rdma_available",
]
