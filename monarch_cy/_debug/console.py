"""The ``monarch_dbg>`` prompt: list, attach, cast, continue, quit (Monarch's).

A :class:`Console` reads commands from an *io* -- :class:`TerminalIO` (the
controller's own terminal), the server's remote client (:mod:`.server`), or a
Monarch ``DebugIO`` (:class:`~.debug_io.LoopIO`) -- and acts on
:data:`~.sessions.SESSIONS`.  An io has ``output(text)``, ``input(prompt, idle) ->
str | None`` (None: end of input, the client went away, or -- when the io is
``interruptible`` -- ``idle()`` became true while waiting), ``closed``, and
optionally ``quit()``.  pdb's output is passed on in the pieces pdb wrote it.

* ``attach``: the session's output since its last input is shown (what a console
  showed already is replayed under Monarch's "<last pdb output ... follows>"), then
  each pdb prompt reads one line from the io; ``detach`` returns to ``monarch_dbg>`` and leaves the rank paused.  While the
  rank runs (``c`` with no breakpoint left) the console stays attached, as
  Monarch's: it shows the rank's next pause (post-mortem where the endpoint
  raised, its next breakpoint) or returns when the endpoint call is over; on an
  interruptible io, ``detach`` returns meanwhile.  One console at a time may hold
  a session.
* ``cast``: the command goes to every selected session; the console waits until
  each has run it (read again, runs on, or ended), and shows their output prefixed
  ``[name rank]`` (Monarch shows none).
* ``continue``: ``clear`` and ``continue`` to every session, waiting until each
  has taken them.
* ``quit`` (or end of input, or a remote client that went away): the console
  ends; for our consoles (terminal, remote client), when no other console is open,
  every paused rank is released (it continues with its breakpoints cleared), so
  that the job runs on rather than waiting for a debugger that is gone.  A console
  over Monarch's ``DebugIO`` (``release_on_quit=False``) leaves them paused, as
  Monarch's ``quit`` does.

The terminal's console ends by itself at the prompt once no session is paused, so
the controller's stdin is the program's again.
"""

from __future__ import annotations

import os
import select
import sys
import threading

from monarch_cy._debug import commands as C
from monarch_cy._debug.sessions import DebugSession, DebugSessions

__all__ = ["Console", "TerminalIO", "table", "start_terminal_console", "BANNER"]

BANNER = ("\n\n************************ MONARCH DEBUGGER ************************\n"
          "Enter 'help' for a list of commands.\n"
          "Enter 'list' to show all active breakpoints.\n\n")
_HEADERS = ("Actor Name", "Rank", "Coords", "Hostname", "Function", "Line No.")


def table(sessions: list) -> str:
    """The sessions as Monarch's ``list`` shows them (a grid, one row each)."""
    if not sessions:
        return "No paused debug sessions in this job.\n"
    rows = [(s.actor_name, str(s.rank), str(s.coords), s.hostname, str(s.function),
             str(s.lineno)) for s in sessions]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(_HEADERS)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"

    def row(cells):
        return "|" + "|".join(f" {c:<{w}} " for c, w in zip(cells, widths)) + "|\n"
    return line + row(_HEADERS) + line.replace("-", "=") + \
        "".join(row(r) + line for r in rows)


class TerminalIO:
    """The controller's own terminal: stdout, and lines from stdin's descriptor
    (polled, so that the console can leave without stealing a later line)."""

    interruptible = True

    def __init__(self) -> None:
        self.fd = sys.stdin.fileno()
        self._buf = b""
        self.closed = False

    def output(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def input(self, prompt: str, idle=None) -> str | None:
        if prompt:
            self.output(prompt)
        while b"\n" not in self._buf:
            if idle is not None and idle():
                return None
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if not ready:
                    continue
                data = os.read(self.fd, 4096)
            except (OSError, ValueError):
                data = b""
            if not data:
                self.closed = True
                return None
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace")


#: How long the controller's prompt waits, once no session is left, for a rank to
#: pause again before it closes (seconds).
IDLE_GRACE_S = 0.5


class Console:
    """One ``monarch_dbg>`` prompt over ``io`` (see the module docstring)."""

    def __init__(self, io, sessions: DebugSessions, leave_when_idle: bool = False,
                 release_on_quit: bool = True) -> None:
        self.io = io
        self.sessions = sessions
        self.leave_when_idle = leave_when_idle
        self.release_on_quit = release_on_quit

    def _idle(self) -> bool:
        return self.leave_when_idle and self.sessions.all_running()

    def _idle_settled(self) -> bool:
        """Idle, and still so after ``IDLE_GRACE_S``: a rank that just continued may
        pause again at once (post-mortem where it raised, its next breakpoint), and
        the prompt must not close under it."""
        if not self._idle():
            return False
        with self.sessions.cond:
            self.sessions.cond.wait_for(lambda: not self.sessions.all_running(),
                                        IDLE_GRACE_S)
        return self._idle()

    def run(self) -> None:
        sessions = self.sessions
        with sessions.cond:
            sessions.consoles.add(self)
        quit_ = True
        try:
            self.io.output(BANNER)
            if not self.leave_when_idle and len(sessions) == 0:
                self.io.output("There are no paused debug sessions in this job yet.\n")
            while True:
                if self._idle_settled():
                    self.io.output("No paused debug sessions left; leaving the debugger.\n")
                    quit_ = False
                    return
                line = self.io.input("monarch_dbg> ", self._idle)
                if line is None:
                    if self._idle() and not self.io.closed:
                        continue                # says so and leaves, above
                    return
                if not line.strip():
                    continue
                try:
                    cmd = C.parse(line)
                except ValueError as e:
                    self.io.output(f"Error parsing input: {e}\n")
                    continue
                if isinstance(cmd, C.Quit):
                    quit_io = getattr(self.io, "quit", None)
                    if quit_io is not None:
                        quit_io()
                    else:
                        self.io.output("Quitting debug session...\n")
                    return
                try:
                    self._do(cmd)
                except ValueError as e:
                    self.io.output(f"Error: {e}\n")
                if self.io.closed:
                    return
        finally:
            with sessions.cond:
                sessions.consoles.discard(self)
                last = not sessions.consoles
            if quit_ and last and self.release_on_quit:
                sessions.release()

    def _do(self, cmd) -> None:
        if isinstance(cmd, C.Help):
            self.io.output(C.HELP)
        elif isinstance(cmd, C.ListCommand):
            self.io.output(table(self.sessions.all()))
        elif isinstance(cmd, C.Attach):
            self.attach(self._find(cmd.actor_name, cmd.rank))
        elif isinstance(cmd, C.Cast):
            name = self._name(cmd.actor_name)
            chosen = []
            for s in self.sessions.iter((name, cmd.ranks)):
                if s.running:       # nothing to run the command until it pauses again
                    self.io.output(f"[{s.actor_name} {s.rank}] skipped: running\n")
                else:
                    chosen.append(s)
            if not chosen:
                raise ValueError(f"no paused session of {name} matches ranks "
                                 f"{_ranks_text(cmd.ranks)}; its paused ranks are "
                                 f"{self._ranks_of(name)}")
            self._cast(chosen, [cmd.command], show=True)
        elif isinstance(cmd, C.Continue):
            chosen = [s for s in self.sessions.all() if not s.running]
            if not chosen:
                self.io.output("No paused debug sessions in this job.\n")
                return
            self._cast(chosen, ["clear", "continue"], show=False)
            self.io.output(f"Continued {len(chosen)} session(s).\n")

    # -- finding sessions ------------------------------------------------------------
    def _name(self, actor_name):
        names = self.sessions.names()
        if actor_name is None:
            if len(names) == 1:
                return names[0]
            if not names:
                raise ValueError("no actor is paused in this job")
            raise ValueError(f"several actors have paused sessions ({', '.join(names)}): "
                             "name one")
        if actor_name not in names:
            raise ValueError(f"no debug session for actor {actor_name!r}; actors with "
                             f"sessions: {', '.join(names) or 'none'}")
        return actor_name

    def _ranks_of(self, name) -> str:
        return ", ".join(str(s.rank) for s in self.sessions.all() if s.actor_name == name)

    def _find(self, actor_name, rank) -> DebugSession:
        name = self._name(actor_name)
        s = self.sessions.find(name, rank)
        if s is None:
            raise ValueError(f"no debug session for rank {rank} of actor {name}; its "
                             f"paused ranks are {self._ranks_of(name)}")
        return s

    # -- attach, cast ------------------------------------------------------------------
    def _hold(self, s: DebugSession) -> bool:
        with self.sessions.cond:
            if s.owner is not None and s.owner is not self:
                return False
            s.owner = self
            return True

    def _let_go(self, s: DebugSession) -> None:
        with self.sessions.cond:
            if s.owner is self:
                s.owner = None
                self.sessions.cond.notify_all()

    def _show(self, chunks: list) -> None:
        for text in chunks:
            self.io.output(text)

    def attach(self, s: DebugSession) -> None:
        io, cond = self.io, self.sessions.cond
        who = f"{s.actor_name} {s.rank} ({s.hostname})"
        if not self._hold(s):
            raise ValueError(f"the session of {s.actor_name} {s.rank} is attached from "
                             "another debugger")
        interruptible = getattr(io, "interruptible", False)
        try:
            io.output(f"Attached to debug session for {who}\n")
            with cond:
                # Since the last command: what a console showed already is replayed
                # under Monarch's marker; what nobody saw yet is simply shown.
                fresh = min(len(s.unseen), len(s.since_input))
                shown = s.since_input[:len(s.since_input) - fresh]
                new = s.since_input[len(s.since_input) - fresh:]
                s.unseen.clear()
            if shown:
                io.output(f"<last pdb output for {s.actor_name} {s.rank} follows>\n")
                self._show(shown)
            self._show(new)
            while True:
                with cond:
                    while not (s.unseen or s.port is not None or s.ended or io.closed
                               or (s.running and interruptible)):
                        cond.wait(0.5)
                    chunks = list(s.unseen)
                    s.unseen.clear()
                    ended, paused = s.ended, s.port is not None
                self._show(chunks)
                if ended:
                    io.output(f"Detached from debug session for {who}: it continued\n")
                    return
                if io.closed:
                    return
                if paused:
                    line = io.input("")
                elif interruptible:          # running: the user may detach meanwhile
                    line = io.input("", lambda: s.port is not None or s.ended
                                    or bool(s.unseen))
                    if line is None and not io.closed:
                        continue
                    if line is not None and line.strip() != "detach":
                        io.output(f"{s.actor_name} {s.rank} is running; 'detach' "
                                  "returns to monarch_dbg>\n")
                        continue
                else:
                    continue
                if line is None:
                    return
                if line.strip() == "detach":
                    io.output(f"Detached from debug session for {who}\n")
                    return
                self.sessions.send(s, line)
        finally:
            self._let_go(s)

    def _cast(self, chosen: list, lines: list, show: bool) -> None:
        cond = self.sessions.cond
        held = [s for s in chosen if self._hold(s)]
        for s in chosen:
            if s not in held:
                self.io.output(f"[{s.actor_name} {s.rank}] skipped: attached from "
                               "another debugger\n")
        try:
            with cond:
                start = {id(s): s.delivered for s in held}
                for s in held:
                    s.unseen.clear()            # shown: only what the command prints
            for s in held:
                for line in lines:
                    self.sessions.send(s, line)
            # Each line is taken by a read; after the last one, wait until the rank
            # has run it: it reads again, runs on, or its call is over.
            n = len(lines)
            with cond:
                while not self.io.closed and not all(
                        s.ended or (s.delivered >= start[id(s)] + n
                                    and (s.port is not None or s.running))
                        for s in held):
                    cond.wait(0.5)
                outs = [(s, "".join(s.unseen)) for s in held]
                for s in held:
                    s.unseen.clear()
            if show:
                for s, text in outs:
                    text = text.removesuffix("(Pdb) ")     # the prompt of its next read
                    for ln in text.splitlines():
                        self.io.output(f"[{s.actor_name} {s.rank}] {ln}\n")
        finally:
            for s in held:
                self._let_go(s)


def _ranks_text(ranks) -> str:
    if isinstance(ranks, range):
        stop = "" if ranks.stop == sys.maxsize else ranks.stop
        return f"{ranks.start}:{stop}:{ranks.step}"
    return str(ranks)


def start_terminal_console(sessions: DebugSessions) -> threading.Thread:
    """Open the prompt on the controller's terminal, in a daemon thread; it ends when
    no session is paused (or on ``quit``)."""
    t = threading.Thread(target=Console(TerminalIO(), sessions, leave_when_idle=True).run,
                         name="monarch_cy-debug-terminal", daemon=True)
    t.start()
    return t
