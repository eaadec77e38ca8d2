"""Errors of the RDMA verbs tier.

* :class:`VerbsError` -- a verbs call or a work completion failed.  ``name`` is
  the status's symbolic name: for a completion the ``ibv_wc_status`` enum name
  (``IBV_WC_REM_ACCESS_ERR``) with libibverbs' own text (``ibv_wc_status_str``)
  in ``message``; for a call the errno name (``EINVAL``) with ``strerror``.
* :class:`VerbsUnavailable` -- verbs cannot be used here at all: no libibverbs,
  no RDMA subsystem in the kernel, no such device.  Also a ``RuntimeError``.
* :class:`VerbsTimeout` -- completions did not arrive in time.  Also a
  ``TimeoutError``.

All survive pickling with their attributes (meshes ship errors between
processes).  They belong in the tree of :mod:`monarch_cy._errors` under
``MonarchCyError``.
"""

from __future__ import annotations

from monarch_cy._errors import MonarchCyError

__all__ = ["VerbsError", "VerbsUnavailable", "VerbsTimeout"]


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
