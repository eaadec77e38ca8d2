"""Errors of ``monarch_cy.rdma`` (defined in :mod:`monarch_cy._errors`, the one home of
the exception tree; this is their documented home and their ``__module__``).

All derive from :class:`monarch_cy.MonarchCyError` (and the matching builtin), and
survive pickling with their attributes, because an owner's error travels back to
the reader over the actor transport.
"""

from __future__ import annotations

from monarch_cy._errors import (BackendUnavailableError, BufferDroppedError,  # noqa: F401
                                OwnerDiedError, RDMAError,
                                RDMAReadTransferWarning, RDMATcpFallbackWarning,
                                RDMATimeoutError, RDMAWriteTransferWarning)
from monarch_cy._errors import _RDMAForeignJobError as ForeignJobError  # noqa: F401

__all__ = ["RDMAError", "BufferDroppedError", "OwnerDiedError", "ForeignJobError",
           "RDMATimeoutError", "BackendUnavailableError", "RDMATcpFallbackWarning",
           "RDMAReadTransferWarning", "RDMAWriteTransferWarning"]
