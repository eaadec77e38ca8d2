"""Errors of ``monarch_cy.rdma``.

All derive from :class:`monarch_cy.MonarchCyError` (and the matching builtin), and
survive pickling with their attributes, because an owner's error travels back to
the reader over the actor transport.
"""

from __future__ import annotations

from monarch_cy._actor.errors import ForeignJobError as _ForeignHandle
from monarch_cy._actor.errors import SupervisionError
from monarch_cy._errors import MonarchCyError

__all__ = ["RDMAError", "BufferDroppedError", "OwnerDiedError", "ForeignJobError",
           "RDMATimeoutError", "BackendUnavailableError", "RDMATcpFallbackWarning",
           "RDMAReadTransferWarning", "RDMAWriteTransferWarning"]


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


class ForeignJobError(RDMAError, _ForeignHandle):
    """A buffer handle made by another job (another controller) was used here (also
    the actor layer's :class:`~monarch_cy._actor.errors.ForeignJobError`)."""


class RDMATimeoutError(RDMAError, TimeoutError):
    """An operation did not complete within its ``timeout``.  What it wrote into the
    destination so far is unspecified."""


class BackendUnavailableError(RDMAError, ValueError):
    """The backend asked for (argument or ``MONARCH_CY_RDMA_BACKEND``) cannot serve this
    pair of processes or memories; the message says why."""


class OwnerDiedError(SupervisionError):
    """The process owning the buffer died before (or while) the operation ran.

    A :class:`~monarch_cy.actor.SupervisionError`: ``actor`` is ``"rdma-buffer
    owner"``, ``rank`` None, ``cause`` says which process and why.
    """

    def __init__(self, actor: str = "rdma-buffer owner", rank=None, cause: str = "") -> None:
        super().__init__(actor, rank, cause)


class RDMATcpFallbackWarning(UserWarning):
    """Monarch's name: a transfer uses the TCP fallback (no verbs device, no same-host
    path).  Emitted once per process, at the first such transfer."""


class RDMAReadTransferWarning(UserWarning):
    """Monarch's name (Monarch 0.7.0 defines it and never emits it; neither do we)."""


class RDMAWriteTransferWarning(UserWarning):
    """Monarch's name (Monarch 0.7.0 defines it and never emits it; neither do we)."""
