"""``DebugController``: the job's one debug actor, in the controller's process.

Spawned on first need with ``get_or_spawn_controller("debug_controller", ...)`` (the
name Monarch uses), so every worker reaches the same one.  Its worker-facing
endpoints never block (a read waits on an explicit response port that a console
answers later), so one actor serves every paused rank at once (its endpoints are
all ``async def``; none awaits):

* ``read(port, actor_name, rank, coords, hostname, function, lineno, output)`` -- a
  worker's pdb waits for a line (its first read opens the session);
* ``running(actor_name, rank, output)`` -- it continued with no breakpoint left;
* ``end(actor_name, rank, output)`` -- its endpoint call is over.

The user's side, Monarch's:

* ``list(print_output=True)`` -- the sessions as :class:`DebugSessionInfo`, printed on
  the controller's ``_debug_io`` when asked;
* ``wait_pending_session()`` -- returns once a session exists;
* ``_enter()`` (a coroutine, for subclasses: Monarch's tests drive the debugger with
  it) -- the ``monarch_dbg>`` prompt over ``self._debug_io`` (a
  :class:`~.debug_io.DebugIO`, :class:`~.debug_io.DebugStdIO` by default) until
  ``quit``, which leaves the sessions paused, as Monarch's;
* ``sessions`` -- the :class:`~.sessions.DebugSessions` of this process.

Its ``__init__`` starts the authenticated server ``monarch-cy debug`` connects to
(:mod:`.server`) and makes the controller's exit release every paused rank.  When a
rank pauses and the controller's stdin is a terminal (``MONARCH_CY_DEBUG_CONSOLE``
``auto``, the default), the ``monarch_dbg>`` prompt opens there (:mod:`.console`);
otherwise one line on stderr says how to attach.  Monarch's plain TCP server
(``_server``, reached with netcat) is not provided: see :attr:`DebugController._server`.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from monarch_cy._actor.meshes.controllers import get_or_spawn_controller
from monarch_cy._actor.model.actor import Actor
from monarch_cy._actor.model.concurrent import concurrent_endpoint
from monarch_cy._actor.model.endpoint import endpoint
from monarch_cy._debug.debug_io import DebugStdIO, LoopIO
from monarch_cy._debug.sessions import SESSIONS, DebugSessionInfo

__all__ = ["NAME", "DebugController", "DebugSessionInfo", "debug_controller"]

NAME = "debug_controller"
#: How long a session's end waits for an attached console to have shown it (seconds).
SHOWN_WITHIN_S = 2.0
_lock = threading.Lock()
_terminal = None            # the controller terminal's console thread, while it runs
_hinted = False


class DebugController(Actor):
    """The job's debug actor; see the module docstring."""

    def __init__(self) -> None:
        import asyncio  # deferred: import time (monarch_cy.actor imports no asyncio)
        from monarch_cy._debug import server  # deferred: import time (zmq)
        self.server = server.start()
        self.sessions = SESSIONS
        self._debug_io = DebugStdIO()
        self._task_lock = asyncio.Lock()
        self._task = None
        self._server = _NoTcpServer()
        atexit.register(SESSIONS.close)     # runs before the runtime stops the procs

    # -- the workers' side ---------------------------------------------------------
    @endpoint(explicit_response_port=True)
    async def read(self, port, actor_name: str, rank: int, coords: dict, hostname: str,
             function, lineno, output: list) -> None:
        if SESSIONS.read(port, actor_name, rank, coords, hostname, function, lineno,
                         output):
            _paused(actor_name, rank, function, lineno, self.server)

    @endpoint
    async def running(self, actor_name: str, rank: int, output: list) -> None:
        SESSIONS.running(actor_name, rank, output)

    @endpoint
    async def end(self, actor_name: str, rank: int, output: list) -> None:
        import asyncio  # deferred: import time (monarch_cy.actor imports no asyncio)
        # An attached console shows the end before the worker goes on (its reply).
        await asyncio.to_thread(SESSIONS.end, actor_name, rank, output, SHOWN_WITHIN_S)

    # -- the user's side (Monarch's) ---------------------------------------------------
    @endpoint
    async def list(self, print_output: bool = True) -> list:
        from monarch_cy._debug.console import table  # deferred: import time
        sessions = SESSIONS.all()
        if print_output:
            await self._debug_io.output(table(sessions))
        return [s.get_info() for s in sessions]

    @concurrent_endpoint
    async def wait_pending_session(self) -> None:
        """Returns once a session exists (waits as long as it takes, as Monarch's)."""
        import asyncio  # deferred: import time (monarch_cy.actor imports no asyncio)
        await asyncio.to_thread(_wait_for_session)

    async def _enter(self) -> None:
        """The ``monarch_dbg>`` prompt over ``self._debug_io``, until ``quit`` or the
        end of its input; the sessions stay paused (Monarch's ``quit``).  The prompt
        runs in a thread; each io call runs on this actor's loop."""
        import asyncio  # deferred: import time (monarch_cy.actor imports no asyncio)
        from monarch_cy._debug.console import Console  # deferred: import time
        io = LoopIO(self._debug_io, asyncio.get_running_loop())
        await asyncio.to_thread(Console(io, SESSIONS, release_on_quit=False).run)


class _NoTcpServer:
    """``DebugController._server``: Monarch's is an awaitable asyncio TCP server for
    ``monarch debug`` (netcat, no authentication).  Awaiting this one raises: the
    debug server here admits only clients holding the job secret."""

    def __await__(self):
        raise NotImplementedError(
            "monarch_cy's debug controller has no plain TCP server (Monarch's "
            "DebugController._server, reached with netcat): its server is CurveZMQ and "
            "admits only clients holding the job secret; connect with 'monarch-cy debug' "
            "(see docs/observability.md, Debugger)")
        yield  # noqa - makes this a generator, as __await__ must be


def _wait_for_session() -> None:
    with SESSIONS.cond:
        while len(SESSIONS) == 0 and not SESSIONS.closing:
            SESSIONS.cond.wait(1.0)


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
