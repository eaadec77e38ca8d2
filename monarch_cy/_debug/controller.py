"""``DebugController``: the job's one debug actor, in the controller's process.

Spawned on first need with ``get_or_spawn_controller("debug_controller", ...)`` (the
name Monarch uses), so every worker reaches the same one.  Its endpoints never
block (a read waits on an explicit response port that a console answers later), so
one sync actor serves every paused rank at once:

* ``read(port, actor_name, rank, coords, hostname, function, lineno, output)`` -- a
  worker's pdb waits for a line (its first read registers the session);
* ``end(actor_name, rank, output)`` -- the session is over;
* ``list(print_output=True)`` -- the sessions as :class:`DebugSessionInfo` (Monarch's).

Its ``__init__`` starts the authenticated server ``monarch-cy debug`` connects to
(:mod:`.server`) and makes the controller's exit release every paused rank.  When a
rank pauses and the controller's stdin is a terminal (``MONARCH_CY_DEBUG_CONSOLE``
``auto``, the default), the ``monarch_dbg>`` prompt opens there (:mod:`.console`);
otherwise one line on stderr says how to attach.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from dataclasses import dataclass

from monarch_cy._actor.meshes.controllers import get_or_spawn_controller
from monarch_cy._actor.model.actor import Actor
from monarch_cy._actor.model.endpoint import endpoint
from monarch_cy._debug.sessions import SESSIONS

__all__ = ["NAME", "DebugController", "DebugSessionInfo", "debug_controller"]

NAME = "debug_controller"
_lock = threading.Lock()
_terminal = None            # the controller terminal's console thread, while it runs
_hinted = False


@dataclass(order=True)
class DebugSessionInfo:
    """One paused session, as Monarch's ``DebugController.list`` returns it."""

    actor_name: str
    rank: int
    coords: dict
    hostname: str
    function: str | None
    lineno: int | None


class DebugController(Actor):
    """The job's debug actor; see the module docstring."""

    def __init__(self) -> None:
        from monarch_cy._debug import server  # deferred: import time (zmq)
        self.server = server.start()
        atexit.register(SESSIONS.close)     # runs before the runtime stops the procs

    @endpoint(explicit_response_port=True)
    def read(self, port, actor_name: str, rank: int, coords: dict, hostname: str,
             function, lineno, output: str) -> None:
        if SESSIONS.read(port, actor_name, rank, coords, hostname, function, lineno,
                         output):
            _paused(actor_name, rank, function, lineno, self.server)

    @endpoint
    def end(self, actor_name: str, rank: int, output: str) -> None:
        SESSIONS.end(actor_name, rank, output)

    @endpoint
    def list(self, print_output: bool = True) -> list:
        from monarch_cy._debug.console import table  # deferred: import time
        infos = [DebugSessionInfo(s.actor_name, s.rank, dict(s.coords), s.hostname,
                                  s.function, s.lineno) for s in SESSIONS.all()]
        if print_output:
            sys.stdout.write(table(SESSIONS.all()))
            sys.stdout.flush()
        return infos


def _paused(actor_name, rank, function, lineno, server) -> None:
    """A session opened: open the terminal's prompt, or say how to attach."""
    global _terminal, _hinted
    from monarch_cy import _config
    with _lock:
        if _config.debug_console() == "auto" and _isatty():
            if _terminal is None or not _terminal.is_alive():
                from monarch_cy._debug.console import start_terminal_console  # deferred: import time
                _terminal = start_terminal_console(SESSIONS)
            return
        if _hinted:
            return
        _hinted = True
    where = f" at {function}:{lineno}" if function else ""
    how = "monarch-cy debug" if server is None or server.error else \
        f"monarch-cy debug --job {os.getpid()}"
    print(f"monarch_cy: {actor_name} rank {rank} is paused at a breakpoint{where}; "
          f"attach with: {how}", file=sys.stderr, flush=True)


def _isatty() -> bool:
    try:
        return os.isatty(sys.stdin.fileno()) and os.isatty(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        return False


_mesh = None


def debug_controller():
    """The job's debug controller actor mesh (Monarch's ``debug_controller()``):
    spawned in the controller's process on first use, from the client or any actor;
    blocks until it is up."""
    global _mesh
    if _mesh is None:
        _mesh = get_or_spawn_controller(NAME, DebugController).get()
    return _mesh
