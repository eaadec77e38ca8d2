"""A host agent's side of its procs' output: every byte they write to fds 1 and 2,
sent to the controller that asked for them.

The same capture as for the controller's own procs (:mod:`monarch_cy._actor.launch.
proc_output`, whose FIFOs this reuses): per proc incarnation two FIFOs in the agent's
run directory, which the proc opens as its fds 1 and 2 before it imports anything
(children inherit them).  The agent reads them in its loop and sends each chunk as
``(OUTPUT, key, stream, bytes)`` on its connection to the controller, whose
``ProcOutput`` for that proc splits lines, prints them with the rank, keeps the log
file and the failure tail, exactly as for a local proc.  Chunks travel on the one
connection that also carries the proc's ``EXIT``, and :meth:`OutputRelay.at_exit`
sends what the FIFOs still hold first, so the controller has a dead proc's last lines
before its death.  Reading stays in the agent, not in the proc, for the reason given
in ``proc_output``: a SIGKILLed proc loses nothing it wrote.

Everything here runs in the agent's loop thread.
"""

from __future__ import annotations

import itertools
import os

from monarch_cy._actor.launch.proc_output import make_fifos, read_ready
from monarch_cy._hosts import protocol as P
from monarch_cy._transport.unix_records import unlink_quietly

__all__ = ["OutputRelay"]


class _Capture:
    __slots__ = ("key", "ident", "paths", "fds", "hold")

    def __init__(self, key, ident, paths, fds, hold) -> None:
        self.key, self.ident, self.paths, self.fds, self.hold = key, ident, paths, fds, hold


class OutputRelay:
    """The FIFOs of the agent's procs.  ``watch(fd)``/``unwatch(fd)``: add a read end
    to (remove it from) the agent's poller; ``send(ident, msg)``: to a controller."""

    def __init__(self, rundir: str, watch, unwatch, send) -> None:
        self.rundir = rundir
        self._watch, self._unwatch, self._send = watch, unwatch, send
        self._tags = itertools.count()
        self._by_fd = {}         # read fd -> _Capture
        self._by_key = {}        # proc key -> _Capture (until its proc exits)

    def open(self, key: str, ident: bytes) -> tuple:
        """FIFOs for a proc about to start; their paths (the proc's ``stdio``)."""
        paths, fds, hold = make_fifos(self.rundir, f"o{next(self._tags)}")
        cap = _Capture(key, ident, paths, fds, hold)
        self._by_key[key] = cap
        for fd in fds:
            self._by_fd[fd] = cap
            self._watch(fd)
        return paths

    def owns(self, fd) -> bool:
        return fd in self._by_fd

    def readable(self, fd: int) -> None:
        """A read end has data, or its writers are all gone."""
        cap = self._by_fd.get(fd)
        if cap is None:
            return
        data = read_ready(fd)
        if data:
            self._send(cap.ident, (P.OUTPUT, cap.key, cap.fds[fd], data))
        elif data is not None:
            self._close_fd(cap, fd)

    def at_exit(self, key: str) -> None:
        """The proc exited (before its ``EXIT`` is sent): send what its FIFOs hold
        and let go of the write ends; the read ends close once the proc's children
        have closed theirs too."""
        cap = self._by_key.pop(key, None)
        if cap is None:
            return
        for fd in list(cap.fds):
            while fd in cap.fds:
                data = read_ready(fd)
                if not data:
                    break
                self._send(cap.ident, (P.OUTPUT, cap.key, cap.fds[fd], data))
        for w in cap.hold:
            os.close(w)
        cap.hold = []
        for path in cap.paths:
            unlink_quietly(path)

    def drop(self, key: str) -> None:
        """A proc that never started: close everything of it."""
        cap = self._by_key.get(key)
        if cap is None:
            return
        self.at_exit(key)
        for fd in list(cap.fds):
            self._close_fd(cap, fd)

    def close(self) -> None:
        """The agent ends: close every FIFO."""
        for key in list(self._by_key):
            self.at_exit(key)
        for fd, cap in list(self._by_fd.items()):
            self._close_fd(cap, fd)

    def _close_fd(self, cap: _Capture, fd: int) -> None:
        cap.fds.pop(fd, None)
        self._by_fd.pop(fd, None)
        self._unwatch(fd)
        os.close(fd)
