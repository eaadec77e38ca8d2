"""``MeshFailure``: what an owner's ``__supervise__`` (or the fault hook) receives.

The record of one failure (a proc that died or went silent, an actor that failed),
with the failures of children that caused it.  Picklable: failures travel from the
failed actor's proc to its owner's.  Who receives it and when: :mod:`.client_faults`
(the client) and the hosting floor (an actor owner).
"""

from __future__ import annotations

from monarch_cy._errors import SupervisionError

__all__ = ["MeshFailure", "actor_who", "with_tail", "undeliverable", "CLIENT_WHO",
           "PROC_STOPPED", "owner_lost"]

#: The cause every process of the job is told when a proc exits because its proc
#: mesh was stopped (no failure: nobody's ``__supervise__`` hears of it).
PROC_STOPPED = "proc mesh stopped"


class MeshFailure:
    """What an owner's ``__supervise__`` (or the fault hook) receives.

    Monarch's face: ``mesh_name``, ``mesh`` (None here), ``report()`` (``The actor
    <who> and all its descendants have failed:`` and the cause, indented), and
    ``str``/``repr`` ``MeshFailure(mesh_name=..., crashed_ranks=[...], event=Supervision
    event: actor <who> failed: ...)``.  Ours besides: ``ranks`` (tuple of failed
    ranks: the actor's rank in its mesh, or the proc's rank in its proc mesh;
    ``crashed_ranks`` is the same as a list), ``rank`` (the first), ``cause`` (the
    reason: exit status, signal, the remote traceback), ``kind`` (``"proc"``,
    ``"actor"``, ``"unhandled"``: an actor that failed because it did not handle
    its child's failure, ``children[0]``, so its ``report()`` is the child's, as
    Monarch's; or ``"raised"``: its ``__supervise__`` raised ``cause`` while handling
    ``children[0]``; or ``"undeliverable"``: a call of the client reached an actor
    that had already failed or stopped, :func:`undeliverable`), ``details`` (more
    lines for the report), ``children`` (the unhandled child failures that caused
    this one), :meth:`root`.  Picklable.
    """

    __slots__ = ("mesh_name", "ranks", "cause", "kind", "details", "children", "addrs",
                 "who")

    def __init__(self, mesh_name: str, ranks, cause: str, kind: str = "actor",
                 details: str = "", children=(), addrs=(), who: str | None = None) -> None:
        self.mesh_name = str(mesh_name)
        self.ranks = tuple(ranks)
        self.cause = str(cause)
        self.kind = kind
        self.details = str(details)
        self.children = tuple(children)
        self.addrs = tuple(addrs)
        self.who = str(who) if who else (f"{self.mesh_name}[{self.ranks[0]}]"
                                          if self.ranks else self.mesh_name)

    @property
    def rank(self):
        """The first failed rank (or None)."""
        return self.ranks[0] if self.ranks else None

    @property
    def crashed_ranks(self) -> list:
        return list(self.ranks)

    @property
    def mesh(self):
        """Monarch's handle of the failed mesh; None here (use ``mesh_name``)."""
        return None

    def _cause_lines(self) -> str:
        out = _indent(self.cause)
        if self.details:
            out += "\n" + _indent(self.details)
        for c in self.children:
            out += "\n  caused by: " + c.report().replace("\n", "\n  ")
        return out

    def root(self) -> "MeshFailure":
        """The failure at the bottom of the chain: this one, or, for an actor that
        failed because it did not handle a child's failure (``kind ==
        "unhandled"``), that child's root."""
        f = self
        while f.kind == "unhandled" and f.children:
            f = f.children[0]
        return f

    def report(self) -> str:
        """The user-readable report (Monarch's wording): the root failure's actor and
        cause (an owner that did not handle its child's failure reports the child's,
        as Monarch's does)."""
        if self.kind == "raised" and self.children:
            return self.error()._text()
        r = self.root()
        return f"The actor {r.who} and all its descendants have failed:\n" \
               f"{r._cause_lines()}"

    def _event(self) -> str:
        """Monarch's "Supervision event: ..." text of this failure."""
        if self.kind == "unhandled" and self.children:
            return (f"Supervision event: actor {self.who} failed because it did not "
                    f"handle a supervision event from its child. The child's event "
                    f"was:\n{_indent(self.children[0]._event())}")
        if self.kind == "raised" and self.children:
            return (f"Supervision event: actor {self.who} failed:\n{_indent(self.cause)}"
                    f"\nThis error occurred while handling a supervision event from "
                    f"its child. The event was:\n{_indent(self.children[0]._event())}")
        end = "\n" if self.cause.endswith("\n") and not self.details else ""
        return f"Supervision event: actor {self.who} failed:\n{self._cause_lines()}{end}"

    def __str__(self) -> str:
        event = self._event()
        end = "\n" if self.kind in ("unhandled", "raised") and self.children else ""
        return (f"MeshFailure(mesh_name={self.mesh_name}, crashed_ranks="
                f"{list(self.ranks)}, event={event}{end})")

    __repr__ = __str__

    def __reduce__(self):
        return (MeshFailure, (self.mesh_name, self.ranks, self.cause, self.kind,
                              self.details, self.children, self.addrs, self.who))

    def error(self) -> SupervisionError:
        """This failure as a :class:`SupervisionError`: this mesh and rank, and (as
        Monarch's) the root failure's actor and cause."""
        if self.kind == "raised" and self.children:
            return SupervisionError(self.mesh_name, self.rank, self.cause, who=self.who,
                                    during=self.children[0].report())
        r = self.root()
        cause = r.cause + (("\n" if not r.cause.endswith("\n") else "") + r.details
                           if r.details else "")
        return SupervisionError(self.mesh_name, self.rank, cause, who=r.who)


_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def new_mesh_uid() -> str:
    """A random id for one actor mesh (11 base-58 characters, as Monarch's), which
    its failures carry in ``MeshFailure.mesh_name`` (``name-<id>``)."""
    import secrets  # deferred: import time (spawning is rare)
    return secrets.choice(_B58[:9]) + "".join(secrets.choice(_B58) for _ in range(10))


def failure_mesh_name(name: str, owner) -> str:
    """``MeshFailure.mesh_name`` of actor mesh ``name`` spawned with ``owner`` (the
    spawn's owner tuple, whose 4th item is the mesh's id): ``name-<id>``, as
    Monarch's; ``name`` when there is none."""
    if owner and len(owner) > 3 and owner[3]:
        return f"{name}-{owner[3]}"
    return str(name)


def actor_who(cls_path: str, mesh_name: str, point, owner: str = "<root>") -> str:
    """How Monarch names one actor in failure texts: ``<root>.<module.Class
    name{'gpus': 1/2}>`` (``point`` is the actor's :class:`Point` in its mesh, left
    out when the mesh has no dimensions; an actor spawned by another actor gets
    that actor's name, ``owner``, in front instead of ``<root>``)."""
    where = repr(point) if len(point) else ""
    return f"{owner}.<{cls_path} {mesh_name}{where}>"


#: How Monarch names the client (the controller's own actor) in failure texts.
CLIENT_WHO = "<monarch._src.actor.actor_mesh.RootClientActor client>"


def undeliverable(endpoint: str, adverb, sender: str, dest: str, why: str,
                  data_len: int) -> MeshFailure:
    """The failure Monarch's client hook gets when a call of the client reached an
    actor that had already failed or stopped (Monarch bounces the message back to
    its sender): ``mesh_name`` ``'<none>'``, no ranks, the client as the failed
    actor, and the bounce described line by line as Monarch does.  ``endpoint``:
    ``mesh.method()``; ``adverb``: ``call_one``, ``call``, ``choose``, ``stream`` or
    None (a message sent with ``broadcast`` or to a user's port: the top line then
    names ``dest``); ``why``: ``"failed"`` or ``"stopped"``.  ``sender``, ``dest``,
    the message type and ``data_len`` (the call's payload in bytes) are monarch_cy's
    own (Monarch's name its internal actors and wire format)."""
    top = (f"undeliverable message for {endpoint} ({adverb})" if adverb
           else f"undeliverable message to {dest}")
    cause = (f"{top}:\n\tdescription: delivery of message from sender to dest failed\n"
             f"\tsender: {sender}\n\tdest: {dest}\n\tmessage type: monarch_cy::call\n"
             f"\tdata_len: {data_len}\n"
             f"\terror: delivery failure: invalid reference {dest}: actor {why}\n")
    return MeshFailure("<none>", (), cause, "undeliverable", who=CLIENT_WHO)


def owner_lost(owner_who: str, mesh_name: str, cause: str) -> str:
    """Why calls on an actor mesh whose owner (an actor) died with its process fail:
    Monarch's words (its owner holds the mesh's controller, and Monarch gives up on
    it after a timeout; monarch_cy is told of the death at once, and says so)."""
    first = str(cause).splitlines()[0] if cause else "it exited"
    return (f"timed out reaching controller {owner_who} for mesh {mesh_name}. "
            f"Assuming controller's proc is dead (it is: {first})")


def with_tail(cause: str, lines) -> str:
    """A dead proc's ``cause`` (Monarch's line, unchanged) followed by the last
    ``lines`` it wrote, oldest first, each as the controller printed it::

        the process this actor was running on failed: Killed(sig=9)
        the last 2 lines it wrote (stdout and stderr, oldest first):
          [trainer 3] step 41
          [proc 3] CUDA error: an illegal memory access was encountered

    (Monarch keeps such a tail in the proc's status and its trace, not in the
    failure's text; ours is in every text that carries the cause: ``MeshFailure``,
    its ``report()``, ``SupervisionError``.)  ``cause`` alone when ``lines`` is
    empty."""
    lines = list(lines)
    if not lines:
        return cause
    n = len(lines)
    head = f"the last {n} lines it wrote" if n > 1 else "the last line it wrote"
    return f"{cause}\n{head} (stdout and stderr, oldest first):\n" + \
        "\n".join("  " + ln for ln in lines)


def _indent(text: str) -> str:
    return "  " + str(text).rstrip("\n").replace("\n", "\n  ")
