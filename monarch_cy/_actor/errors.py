"""Errors of the actor layer.

All derive from :class:`monarch_cy._errors.MonarchCyError` and survive pickling with
their attributes (``__reduce__`` rebuilds them from constructor arguments), because
they travel between the processes of a mesh.
"""

from __future__ import annotations

from monarch_cy._errors import MonarchCyError

__all__ = [
    "ActorError",
    "SupervisionError",
    "MeshStoppedError",
    "MeshIndexError",
]


class ActorError(MonarchCyError):
    """An endpoint raised: carries the remote exception and its formatted traceback.

    The actor that raised keeps serving; only this call failed.

    Attributes:
        exception: the remote exception object when it could be pickled, else None.
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
        where = f"{actor}[{rank}].{endpoint}" if actor else endpoint
        if exception is not None:
            shown = repr(exception)
        else:   # could not be pickled: the traceback's last line names type and text
            lines = [ln for ln in self.remote_traceback.splitlines() if ln.strip()]
            shown = (lines[-1].strip() if lines else "an exception") + " (not picklable)"
        super().__init__(
            f"endpoint {where} raised {shown}\n"
            f"--- remote traceback ---\n{self.remote_traceback}"
        )

    def __reduce__(self):
        return (type(self), (self.exception, self.remote_traceback, self.actor, self.rank,
                             self.endpoint))


class SupervisionError(MonarchCyError, RuntimeError):
    """An actor or its process failed (died, was stopped, or failed to start).

    Pending calls on a failed actor end with this error rather than hanging; later
    calls raise it at once.  Base class of the supervision failures of issue 4.

    Attributes: ``actor`` (mesh name), ``rank`` (rank of the failed actor or proc, or
    None), ``cause`` (text: exit status, signal, or reason).
    """

    def __init__(self, actor: str, rank, cause: str) -> None:
        self.actor = str(actor)
        self.rank = rank
        self.cause = str(cause)
        super().__init__(f"actor {self.actor!r} rank {rank}: {self.cause}")

    def __reduce__(self):
        return (type(self), (self.actor, self.rank, self.cause))


class MeshStoppedError(SupervisionError):
    """The proc mesh was stopped; calls on it (or its actors) are refused."""


class MeshIndexError(MonarchCyError, IndexError, ValueError):
    """A mesh slice or coordinate is out of range or names an unknown dimension.

    Subclasses both ``IndexError`` and ``ValueError``.
    """

    def __init__(self, message: str) -> None:
        self.message = str(message)
        super().__init__(self.message)

    def __reduce__(self):
        return (type(self), (self.message,))
