"""``MeshFailure``: what an owner's ``__supervise__`` (or the fault hook) receives.

The record of one failure (a proc that died or went silent, an actor that failed),
with the failures of children that caused it.  Picklable: failures travel from the
failed actor's proc to its owner's.  Who receives it and when: :mod:`.client_faults`
(the client) and the hosting floor (an actor owner).
"""

from __future__ import annotations

from monarch_cy._errors import SupervisionError

__all__ = ["MeshFailure"]


class MeshFailure:
    """What an owner's ``__supervise__`` (or the fault hook) receives.

    Attributes: ``mesh_name`` (the actor mesh, or the proc mesh for a proc
    failure), ``ranks`` (tuple of failed ranks: the actor's rank in its mesh, or the
    proc's rank in its proc mesh), ``cause`` (one line: exit code, signal name,
    missed heartbeats, the exception), ``kind`` (``"proc"`` or ``"actor"``),
    ``children`` (the unhandled child failures that caused this one).
    ``report()`` is the full text (with the remote traceback when there is one);
    ``str(failure)`` is the report.  Picklable.
    """

    __slots__ = ("mesh_name", "ranks", "cause", "kind", "details", "children", "addrs")

    def __init__(self, mesh_name: str, ranks, cause: str, kind: str = "actor",
                 details: str = "", children=(), addrs=()) -> None:
        self.mesh_name = str(mesh_name)
        self.ranks = tuple(ranks)
        self.cause = str(cause)
        self.kind = kind
        self.details = str(details)
        self.children = tuple(children)
        self.addrs = tuple(addrs)

    @property
    def rank(self):
        """The first failed rank (or None)."""
        return self.ranks[0] if self.ranks else None

    def report(self) -> str:
        what = "proc mesh" if self.kind == "proc" else "actor mesh"
        ranks = ", ".join(map(str, self.ranks))
        out = f"{what} {self.mesh_name!r} rank(s) {ranks} failed: {self.cause}"
        if self.details:
            out += "\n" + self.details.rstrip()
        for c in self.children:
            out += "\n  caused by: " + c.report().replace("\n", "\n  ")
        return out

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        return (f"MeshFailure(mesh_name={self.mesh_name!r}, ranks={self.ranks!r}, "
                f"cause={self.cause!r})")

    def __reduce__(self):
        return (MeshFailure, (self.mesh_name, self.ranks, self.cause, self.kind,
                              self.details, self.children, self.addrs))

    def error(self) -> SupervisionError:
        """This failure as a :class:`SupervisionError` (actor, first rank, report)."""
        return SupervisionError(self.mesh_name, self.rank, self.report())
