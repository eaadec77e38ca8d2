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
    "ForeignJobError",
]


class ActorError(MonarchCyError):
    """An endpoint raised: carries the remote exception and its formatted traceback.

    The actor that raised keeps serving; only this call failed.  The text follows
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
        where = f"{actor}[{rank}].{endpoint}" if actor and rank is not None else \
            f"{actor}.{endpoint}" if actor else endpoint
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
        super().__init__(self._text())

    def _text(self) -> str:
        # Monarch's wording of a supervision event
        who = f"{self.actor}[{self.rank}]" if self.rank is not None else self.actor
        return f"The actor {who} and all its descendants have failed:\n  {self.cause}"

    def __reduce__(self):
        return (type(self), (self.actor, self.rank, self.cause))


class MeshStoppedError(SupervisionError):
    """The proc mesh was stopped; calls on it (or its actors) are refused."""

    def _text(self) -> str:
        who = f"{self.actor}[{self.rank}]" if self.rank is not None else self.actor
        return f"The actor {who} has status:\n  stopped: {self.cause}"


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
