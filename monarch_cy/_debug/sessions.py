"""The controller's debug sessions: one per (actor name, rank), as in Monarch.

A session lives from the first pause of an endpoint call (its first read) until that
call is over: the endpoint returned, or it raised and its post-mortem pause was
continued -- Monarch's lifetime (``debugger_session_start`` .. ``_maybe_exit_debugger``).
In between it is, at any moment:

* **paused** -- its pdb waits for a line: a worker's :class:`~.remote_pdb.RemotePdb`
  reads by calling the debug controller's ``read`` endpoint with an explicit response
  port, which :meth:`DebugSessions.read` records as the session's pending read (the
  first read creates the session), with the output pdb wrote since its last read;
* **running** -- it continued with no breakpoint left (:meth:`DebugSessions.running`);
  it stays listed, at the place it was last paused, until it pauses again
  (another ``breakpoint()``, post-mortem) or ends;
* or busy with the line it was sent (a step, ``p x``...).

Output is kept as pdb wrote it, one string per ``write`` (Monarch's
``DebuggerWrite``s), so that a console shows it in the same pieces.

A console answers a pending read with :meth:`DebugSessions.send`, which sends the line
on the port; the worker's ``readline`` returns it.  A line sent while no read is pending
waits in the session's queue for the next one.  The answer ``None`` (see
:meth:`DebugSessions.release`) means "let go": the worker clears its breakpoints and
continues.  That is what happens to every session when the controller exits, and when
the last attached debugger of ours quits.

Everything is guarded by one condition variable, :attr:`DebugSessions.cond`;
consoles wait on it for output, a pending read or an end.  :class:`DebugSessions`
also has Monarch's table API (``insert``/``get``/``remove``/``iter``/``info``, with
its ``ValueError`` texts), which is how Monarch's ``monarch._src.actor.debugger``
names it.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Iterator

__all__ = ["DebugSession", "DebugSessionInfo", "DebugSessions", "SESSIONS"]


@dataclass
class DebugSessionInfo:
    """One session, as Monarch's ``DebugController.list`` returns it; ordered by actor
    name, then rank."""

    actor_name: str
    rank: int
    coords: dict
    hostname: str
    function: str | None
    lineno: int | None

    def __lt__(self, other: "DebugSessionInfo") -> bool:
        return (self.actor_name, self.rank) < (other.actor_name, other.rank)


class DebugSession:
    """One actor's paused (or stepping, or running) endpoint call: where it stopped,
    its pending read, the output nobody has seen yet (``unseen``) and all output
    since the last line sent to it (``since_input``, replayed on a later attach, as
    Monarch)."""

    __slots__ = ("actor_name", "rank", "coords", "hostname", "function", "lineno",
                 "port", "queued", "unseen", "since_input", "ended", "owner", "reads",
                 "delivered", "running")

    def __init__(self, rank: int, coords: dict, hostname: str, actor_name: str) -> None:
        self.actor_name, self.rank, self.coords, self.hostname = \
            actor_name, rank, coords, hostname
        self.function = self.lineno = None
        self.port = None            # the pending read's Port, or None
        self.queued = deque()       # lines sent while no read was pending
        self.unseen = []            # pdb's writes nobody has been shown yet
        self.since_input = []       # pdb's writes since the last line delivered
        self.ended = False
        self.owner = None           # the console attached to it
        self.reads = 0              # reads so far
        self.delivered = 0          # lines delivered so far
        self.running = False        # continued with no breakpoint left

    @property
    def key(self) -> tuple:
        return (self.actor_name, self.rank)

    @property
    def paused(self) -> bool:
        return self.port is not None

    def get_info(self) -> DebugSessionInfo:
        return DebugSessionInfo(self.actor_name, self.rank, dict(self.coords),
                                self.hostname, self.function, self.lineno)


class DebugSessions:
    """Every session of this job (in the controller's process)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._by_key = {}
        self.consoles = set()       # consoles open now (terminal, remote clients)
        self.closing = False        # the controller is exiting: every read is released

    # -- Monarch's table API -----------------------------------------------------
    def insert(self, session: DebugSession) -> None:
        with self.cond:
            if session.key in self._by_key:
                raise ValueError(f"Debug session for rank {session.rank} already exists "
                                 f"for actor {session.actor_name}")
            self._by_key[session.key] = session
            self.cond.notify_all()

    def _must(self, actor_name: str, rank: int) -> DebugSession:
        s = self._by_key.get((actor_name, rank))
        if s is None:
            if not any(k[0] == actor_name for k in self._by_key):
                raise ValueError(f"No debug sessions for actor {actor_name}")
            raise ValueError(f"No debug session for rank {rank} for actor {actor_name}")
        return s

    def get(self, actor_name: str, rank: int) -> DebugSession:
        """The session; ``ValueError`` naming what is missing (Monarch's texts)."""
        with self.cond:
            return self._must(actor_name, rank)

    def remove(self, actor_name: str, rank: int) -> DebugSession:
        with self.cond:
            s = self._must(actor_name, rank)
            del self._by_key[s.key]
            self.cond.notify_all()
            return s

    def iter(self, selection) -> Iterator[DebugSession]:
        """The sessions ``selection`` names: None (all), or ``(actor name, ranks)``
        where ranks is None (all of that actor), an int, a list, a range, or a dict
        of dimension -> int/list/range (a session lacking a dimension is not
        chosen).  A snapshot: safe while sessions come and go."""
        with self.cond:
            chosen = sorted(self._by_key.values(), key=lambda s: s.key)
        if selection is None:
            yield from chosen
            return
        actor_name, ranks = selection
        for s in chosen:
            if s.actor_name == actor_name and _selected(ranks, s.rank, s.coords):
                yield s

    def info(self) -> list:
        return [s.get_info() for s in self.all()]

    def __len__(self) -> int:
        with self.cond:
            return len(self._by_key)

    def __contains__(self, key) -> bool:
        with self.cond:
            return tuple(key) in self._by_key

    # -- the debug controller's side (worker requests) ---------------------------
    def read(self, port, actor_name, rank, coords, hostname, function, lineno,
             output: list) -> bool:
        """A worker waits for a line; returns True when this created the session."""
        with self.cond:
            s = self._by_key.get((actor_name, rank))
            new = s is None or s.ended
            if new:
                s = self._by_key[(actor_name, rank)] = DebugSession(rank, coords,
                                                                    hostname, actor_name)
            s.function, s.lineno = function, lineno
            s.reads += 1
            s.running = False
            self._wrote(s, output)
            if self.closing:
                port.send(None)
            elif s.queued:
                self._deliver(s, port, s.queued.popleft())
            else:
                s.port = port
            self.cond.notify_all()
            return new

    def running(self, actor_name, rank, output: list) -> None:
        """The worker continued with no breakpoint left; its call goes on."""
        with self.cond:
            s = self._by_key.get((actor_name, rank))
            if s is None:
                return
            self._wrote(s, output)
            s.running = True
            self.cond.notify_all()

    def end(self, actor_name, rank, output: list, shown_within: float = 0.0) -> None:
        """The session's endpoint call is over (it returned, or its post-mortem was
        continued), or pdb quit outside an endpoint.  Waits up to ``shown_within``
        seconds for a console attached to it to have shown that (so that a debugger
        shows the end before the call's result reaches its caller)."""
        with self.cond:
            s = self._by_key.pop((actor_name, rank), None)
            if s is None:
                return
            s.unseen.extend(output)
            s.ended = True
            s.port = None
            self.cond.notify_all()
            self.cond.wait_for(lambda: s.owner is None, shown_within)

    @staticmethod
    def _wrote(s: DebugSession, output: list) -> None:
        s.unseen.extend(output)
        s.since_input.extend(output)

    # -- the consoles' side ------------------------------------------------------
    def send(self, s: DebugSession, line) -> None:
        """Give ``line`` (a pdb command, or None: let go) to ``s``'s pending read, or
        queue it for its next one."""
        with self.cond:
            if s.ended:
                return
            if s.port is not None:
                port, s.port = s.port, None
                self._deliver(s, port, line)
            else:
                s.queued.append(line)
            self.cond.notify_all()

    @staticmethod
    def _deliver(s: DebugSession, port, line) -> None:
        s.since_input = []
        s.delivered += 1
        try:
            port.send(line)
        except Exception:  # noqa: BLE001 - the worker is gone: its session ends
            s.ended = True

    def release(self) -> None:
        """Let every session go (each continues with its breakpoints cleared)."""
        with self.cond:
            for s in list(self._by_key.values()):
                s.queued.clear()
                if s.port is not None:
                    port, s.port = s.port, None
                    self._deliver(s, port, None)
                else:
                    s.queued.append(None)
            self.cond.notify_all()

    def close(self) -> None:
        """The controller is exiting: release every session, now and at any later
        read."""
        with self.cond:
            self.closing = True
        self.release()

    def all(self) -> list:
        """The live sessions, sorted by actor name and rank."""
        with self.cond:
            return sorted(self._by_key.values(), key=lambda s: s.key)

    def find(self, actor_name, rank) -> DebugSession | None:
        with self.cond:
            return self._by_key.get((actor_name, rank))

    def names(self) -> list:
        with self.cond:
            return sorted({k[0] for k in self._by_key})

    def all_running(self) -> bool:
        """No session is paused or busy with a line (each running, or none left)."""
        with self.cond:
            return all(s.running for s in self._by_key.values())


def _selected(ranks, rank: int, coords: dict) -> bool:
    """Whether a session at ``rank`` with ``coords`` is in the selection ``ranks``."""
    if ranks is None:
        return True
    if isinstance(ranks, int):
        return rank == ranks
    if isinstance(ranks, (list, range)):
        return rank in ranks
    for dim, want in ranks.items():
        if dim not in coords:
            return False
        have = coords[dim]
        if isinstance(want, int) and have != want:
            return False
        if isinstance(want, (list, range)) and have not in want:
            return False
    return True


SESSIONS = DebugSessions()
