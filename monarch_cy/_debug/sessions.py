"""The controller's paused sessions: one per (actor name, rank), as in Monarch.

A worker's :class:`~.remote_pdb.RemotePdb` reads a line by calling the debug
controller's ``read`` endpoint with an explicit response port: :meth:`Sessions.read`
records that port as the session's *pending read* (creating the session at its
first read: that is how a paused actor registers), with the output pdb wrote since
its last read.  A console answers it with :meth:`Sessions.send`, which sends the
line on the port; the worker's ``readline`` returns it.  A line sent while no read
is pending waits in the session's queue for the next one.

The answer ``None`` (see :meth:`Sessions.release`) means "let go": the worker clears
its breakpoints and continues, ending the session.  That is what happens to every
session when the controller exits, and when the last attached debugger quits.

Everything is guarded by one condition variable, :attr:`Sessions.cond`; consoles
wait on it for output, a pending read or an end.
"""

from __future__ import annotations

import threading
from collections import deque

__all__ = ["Session", "Sessions", "SESSIONS"]


class Session:
    """One paused (or stepping) actor: where it stopped, its pending read, the output
    nobody has seen yet (``unseen``) and all output since the last line sent to it
    (``since_input``, replayed on a later attach, as Monarch)."""

    __slots__ = ("actor_name", "rank", "coords", "hostname", "function", "lineno",
                 "port", "queued", "unseen", "since_input", "ended", "owner", "reads")

    def __init__(self, actor_name: str, rank: int, coords: dict, hostname: str) -> None:
        self.actor_name, self.rank, self.coords, self.hostname = \
            actor_name, rank, coords, hostname
        self.function = self.lineno = None
        self.port = None            # the pending read's Port, or None while running
        self.queued = deque()       # lines sent while no read was pending
        self.unseen = []
        self.since_input = []
        self.ended = False
        self.owner = None           # the console attached to it
        self.reads = 0              # reads so far (a cast waits for the next one)

    @property
    def key(self) -> tuple:
        return (self.actor_name, self.rank)

    @property
    def paused(self) -> bool:
        return self.port is not None


class Sessions:
    """Every session of this job (in the controller's process)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._by_key = {}
        self.consoles = set()       # consoles open now (terminal, remote clients)
        self.closing = False        # the controller is exiting: every read is released

    # -- the debug controller's side (worker requests) ---------------------------
    def read(self, port, actor_name, rank, coords, hostname, function, lineno,
             output: str) -> bool:
        """A worker waits for a line; returns True when this created the session."""
        with self.cond:
            s = self._by_key.get((actor_name, rank))
            new = s is None or s.ended
            if new:
                s = self._by_key[(actor_name, rank)] = Session(actor_name, rank, coords,
                                                               hostname)
            s.function, s.lineno = function, lineno
            s.reads += 1
            if output:
                s.unseen.append(output)
                s.since_input.append(output)
            if self.closing:
                port.send(None)
            elif s.queued:
                self._deliver(s, port, s.queued.popleft())
            else:
                s.port = port
            self.cond.notify_all()
            return new

    def end(self, actor_name, rank, output: str) -> None:
        """The worker's session ended (it continued with no breakpoint left, its
        endpoint returned, or it quit)."""
        with self.cond:
            s = self._by_key.pop((actor_name, rank), None)
            if s is None:
                return
            if output:
                s.unseen.append(output)
            s.ended = True
            if s.port is not None:          # cannot happen: the worker was reading
                s.port = None
            self.cond.notify_all()

    # -- the consoles' side ------------------------------------------------------
    def send(self, s: Session, line) -> None:
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
    def _deliver(s: Session, port, line) -> None:
        s.since_input = []
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

    def get(self, actor_name, rank) -> Session | None:
        with self.cond:
            return self._by_key.get((actor_name, rank))

    def names(self) -> list:
        with self.cond:
            return sorted({k[0] for k in self._by_key})

    def __len__(self) -> int:
        with self.cond:
            return len(self._by_key)


SESSIONS = Sessions()
