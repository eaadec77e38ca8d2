"""Stacks of procs on other hosts: their agent runs py-spy for the controller.

``ProcMesh.dump_stacks()`` reads a local proc with py-spy from the controller
(:mod:`monarch_cy._actor.meshes.stacks`); py-spy attaches by pid, so a proc on
another host is read by its host's agent instead:

* controller -> agent ``(STACKS, request id, proc key, rank, timeout)``; the agent
  reads only procs it started for that controller (by key, never a pid it is sent);
* agent -> controller ``(STACKS, request id, ok, value)``: a
  :class:`monarch_cy._stacks.ProcStacks` (``host`` is the agent's hostname), or the
  :class:`~monarch_cy.errors.StackDumpError` that py-spy's absence or ptrace's
  refusal raised there.

The agent's loop must keep answering heartbeats, so each read runs in a thread of
its own (:class:`AgentStacks`), which hands the answer back to the loop through a
pipe the loop polls.  The controller's asker waits for its answer on an event, at
most the read's timeout plus a margin (:class:`StackRequests`); a host lost
meanwhile leaves that proc with an ``error`` rather than a hang.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading

__all__ = ["AgentStacks", "StackRequests", "ANSWER_MARGIN_S"]

ANSWER_MARGIN_S = 5.0      # the asker waits timeout + this for the agent's answer


class AgentStacks:
    """The agent's side: ``request()`` from its loop starts a read; the loop polls
    :attr:`fd` and calls :meth:`answers` when it is readable."""

    def __init__(self) -> None:
        self.fd, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._done = collections.deque()

    def request(self, ident: bytes, req: int, pid, rank: int, timeout: float) -> None:
        """Read ``pid`` in a thread (None: the proc is not running here)."""
        threading.Thread(target=self._read, args=(ident, req, pid, rank, timeout),
                         name="monarch_cy-agent-stacks", daemon=True).start()

    def _read(self, ident, req, pid, rank, timeout) -> None:
        from monarch_cy._stacks import ProcStacks, dump  # deferred: py-spy's module
        import socket
        try:
            if pid is None:
                value = ProcStacks(rank, None, socket.gethostname(),
                                   error="the proc is not running on this host (exited?)")
            else:
                value = dump(pid, rank=rank, timeout=timeout)
            ok = True
        except Exception as e:  # noqa: BLE001 - StackDumpError: raised to the asker
            value, ok = e, False
        self._done.append((ident, req, ok, value))
        try:
            os.write(self._w, b"!")
        except OSError:
            pass                          # closed: the agent is ending

    def answers(self) -> list:
        """``[(ident, request id, ok, value)]`` ready now (in the agent's loop)."""
        try:
            while os.read(self.fd, 4096):
                pass
        except OSError:
            pass
        out = []
        while self._done:
            out.append(self._done.popleft())
        return out

    def close(self) -> None:
        for fd in (self.fd, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


class StackRequests:
    """The controller's side: requests waiting for their agent's answer (any
    thread)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting = {}          # request id -> [event, ok, value]
        self._lock = threading.Lock()

    def new(self) -> tuple:
        """``(request id, slot)`` for a request about to be sent."""
        slot = [threading.Event(), None, None]
        with self._lock:
            req = next(self._ids)
            self._waiting[req] = slot
        return req, slot

    def answer(self, req: int, ok: bool, value) -> None:
        with self._lock:
            slot = self._waiting.pop(req, None)
        if slot is not None:
            slot[1], slot[2] = ok, value
            slot[0].set()

    def forget(self, req: int) -> None:
        with self._lock:
            self._waiting.pop(req, None)
