"""The worker's pdb: a :class:`pdb.Pdb` whose stdin and stdout are the controller.

:func:`set_trace` (reached from ``breakpoint()`` or ``pdb.set_trace()`` through
:mod:`.hook`) pauses the calling thread -- the actor's thread, so an async actor's
loop is paused too and no other message of that actor runs meanwhile, as in
Monarch -- under a :class:`RemotePdb`:

* what pdb writes is buffered and travels with its next read (one round trip per
  pdb command, output first), as the list of pdb's writes;
* a read is a call of the debug controller's ``read`` endpoint (see
  :mod:`.controller`), answered with the line a debugger typed.  Its first read
  registers the session, named by the actor mesh's name and the message's rank
  (``context().message_rank``, Monarch's key), with its coordinates and host;
* the session lasts as long as the endpoint call that paused, as Monarch's: when the
  actor continues with no breakpoint left (or pdb's ``quit``/``exit``/EOF) the
  controller hears that it *runs* (the ``running`` endpoint); the actor's host
  calls :meth:`RemotePdb.finish` once the endpoint returned (its breakpoints are
  then cleared, as Monarch's ``_maybe_exit_debugger`` does), which ends it
  (``end``).  A breakpoint outside an endpoint call (in ``__init__`` or another
  hook, in a thread the actor started) ends its session when it continues;
* an endpoint that hit a breakpoint and then raises pauses again where it raised
  (:func:`post_mortem`, in the same session), and fails its call once that pause is
  continued, as Monarch's post-mortem does.

Nothing here kills the actor: pdb's ``quit`` continues instead of raising
``BdbQuit`` into the endpoint (a plain pdb would fail the call); a read answered
``None`` (the controller exiting, the last debugger quitting: :mod:`.sessions`) or
one that fails (the controller is gone) clears the breakpoints and continues.
"""

from __future__ import annotations

import dis
import inspect
import linecache
import os
import pdb
import socket
import sys

__all__ = ["RemotePdb", "set_trace", "post_mortem", "debug_controller_mesh"]

_RETURN_VALUE = dis.opmap.get("RETURN_VALUE")
_ACTOR_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "_actor") + os.sep
_controller = None


def debug_controller_mesh():
    """The job's debug controller (spawned in the controller's process on first use),
    cached in this process."""
    global _controller
    if _controller is None:
        # deferred: import time (the actor runtime; only a paused worker needs it)
        from monarch_cy._actor.meshes.controllers import get_or_spawn_controller
        from monarch_cy._debug.controller import NAME, DebugController
        _controller = _blocking(get_or_spawn_controller(NAME, DebugController))
    return _controller


def _blocking(fut):
    """``fut.get()`` on the actor's thread, also inside an async actor's loop (which
    the debugger pauses anyway: hide the loop, thread-locally, so that ``get`` does
    not warn about blocking it)."""
    import asyncio
    loop = asyncio._get_running_loop()
    if loop is None:
        return fut.get()
    asyncio._set_running_loop(None)
    try:
        return fut.get()
    finally:
        asyncio._set_running_loop(loop)


class _Out:
    """pdb's stdout: kept until the next read (or the session's end)."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self) -> None:
        self.parts = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def take(self) -> list:
        parts = list(self.parts)
        self.parts.clear()
        return parts


class _In:
    """pdb's stdin: each ``readline`` is one read from the controller."""

    encoding = "utf-8"

    def __init__(self, dbg: "RemotePdb") -> None:
        self.dbg = dbg

    def readline(self, size: int = -1) -> str:
        return self.dbg._read_line()

    def isatty(self) -> bool:
        return False


def _endpoint_frame(frame):
    """The frame of the endpoint (or ``__init__``) that ``frame`` runs under: the
    outermost frame above the actor runtime's own code; None outside an actor."""
    found = None
    while frame is not None:
        if frame.f_code.co_filename.startswith(_ACTOR_DIR):
            return found
        found = frame
        frame = frame.f_back
    return None


def _where():
    """``(actor name, rank, coords)`` of the calling thread's actor and message."""
    from monarch_cy._actor.model.actor import context  # deferred: import time
    ctx = context()
    inst = ctx.actor_instance
    if inst.host is None:           # a thread the actor started, not the actor's own
        return "proc", int(os.environ.get("MONARCH_CY_RANK") or 0), {}
    point = ctx.message_rank
    return inst.name, point.rank, {k: point[k] for k in point}


class RemotePdb(pdb.Pdb):
    """pdb over the controller: see the module docstring."""

    def __init__(self, controller, actor_name: str, rank: int, coords: dict,
                 endpoint_frame=None) -> None:
        self._out = _Out()
        super().__init__(stdin=_In(self), stdout=self._out, nosigint=True, readrc=False)
        self.use_rawinput = False
        self.controller = controller
        self.actor_name, self.rank, self.coords = actor_name, rank, coords
        self.hostname = socket.gethostname()
        self._endpoint = endpoint_frame
        self._deferred = False      # the host ends the session (finish), not continue
        self._ended = False
        self._lost = False
        self.dynamic_path = None    # the script that ``<dynamic-code>`` stands for

    def format_stack_entry(self, frame_lineno, lprefix=": "):
        text = super().format_stack_entry(frame_lineno, lprefix)
        if self.dynamic_path and text.startswith(_DYNAMIC):
            text = self.dynamic_path + text[len(_DYNAMIC):]
        return text

    # -- the channel -----------------------------------------------------------------
    def _read_line(self) -> str:
        if self._lost:
            self.clear_all_breaks()
            return "continue\n"
        self._ended = False                 # a read (re)opens the session
        function = lineno = None
        frame = self.curframe
        if frame is not None:
            path = frame.f_code.co_filename
            if path == _DYNAMIC and self.dynamic_path:
                path = self.dynamic_path
            module = inspect.getmodulename(path) or "?"
            function, lineno = f"{module}.{frame.f_code.co_name}", frame.f_lineno
        try:
            line = _blocking(self.controller.read.call_one(
                self.actor_name, self.rank, self.coords, self.hostname, function, lineno,
                self._out.take()))
        except Exception:  # noqa: BLE001 - the controller is gone: run on
            self._lost = True
            line = None
        if line is None:                    # let go: continue without breakpoints
            self.clear_all_breaks()
            return "continue\n"
        return line if line.endswith("\n") else line + "\n"

    def _tell(self, endpoint) -> None:
        if self._lost:
            return
        try:
            _blocking(endpoint.call_one(self.actor_name, self.rank, self._out.take()))
        except Exception:  # noqa: BLE001 - the controller is gone: nothing to tell
            self._lost = True

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._tell(self.controller.end)

    def finish(self) -> None:
        """The endpoint call this pdb paused is over (its host calls this): end the
        session."""
        self.clear_all_breaks()
        self._end()

    # -- pdb, changed where it would quit or hang ------------------------------------
    def set_continue(self) -> None:
        super().set_continue()
        if not self.breaks:                 # tracing stopped: it runs, or it is over
            if self._deferred:
                self._tell(self.controller.running)
            else:
                self._end()

    def do_quit(self, arg):
        """q(uit) | exit: leave the debugger; the actor continues (breakpoints
        cleared) rather than failing the call with BdbQuit."""
        self.clear_all_breaks()
        self.set_continue()
        return 1

    do_q = do_exit = do_quit

    def do_EOF(self, arg):
        self.message("")
        return self.do_quit(arg)

    def do_clear(self, arg):
        """cl(ear) [bpnumber ...]: without an argument, clear every breakpoint at once
        (pdb would ask for a confirmation no remote terminal can give)."""
        if not arg:
            self.clear_all_breaks()
            self.message("Deleted all breakpoints")
            return None
        return super().do_clear(arg)

    do_cl = do_clear

    def dispatch_return(self, frame, arg):
        out = super().dispatch_return(frame, arg)
        if frame is self._endpoint and not self._ended and _returning(frame):
            # The endpoint returns (or raises): stop tracing; the host then ends the
            # session (finish) or pauses post-mortem in it, as Monarch's does.
            self.clear_all_breaks()
            if self._deferred:
                pdb.Pdb.set_continue(self)
            else:
                self.set_continue()
            return None
        return out


def _returning(frame) -> bool:
    """A 'return' event that is a real return (not a coroutine suspending)."""
    if not frame.f_code.co_flags & (inspect.CO_COROUTINE | inspect.CO_GENERATOR |
                                    inspect.CO_ASYNC_GENERATOR):
        return True
    try:
        return frame.f_code.co_code[frame.f_lasti] == _RETURN_VALUE
    except (IndexError, TypeError):
        return True


_DYNAMIC = "<dynamic-code>"


def _dynamic_source(frame) -> str | None:
    """The controller's script, for code that came by value (cloudpickle names its
    file ``<dynamic-code>``; its globals keep the script's ``__file__``): put in
    :mod:`linecache` under that name, so that pdb's ``list`` and ``->`` lines show
    it, and returned for display.  None when ``frame`` is not such code or the file
    is not readable here (another host)."""
    while frame is not None and frame.f_code.co_filename != _DYNAMIC:
        frame = frame.f_back
    path = frame.f_globals.get("__file__") if frame is not None else None
    if not isinstance(path, str):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return None
    linecache.cache[_DYNAMIC] = (sum(map(len, lines)), None, lines, path)
    return path


def set_trace(frame, header: str | None = None) -> None:
    """Pause ``frame`` (the caller of ``breakpoint()``) under a :class:`RemotePdb`.
    If the endpoint being run then raises, its host calls :func:`post_mortem`."""
    from monarch_cy._actor.model.actor import _debugged, _message  # deferred: import time
    name, rank, coords = _where()
    endpoint_frame = _endpoint_frame(frame)
    dbg = RemotePdb(debug_controller_mesh(), name, rank, coords, endpoint_frame)
    dbg.dynamic_path = _dynamic_source(frame)
    if header is not None:
        dbg.message(header)
    msg = _message.get()
    if msg is not None and endpoint_frame is not None and \
            not endpoint_frame.f_code.co_name.startswith("__"):
        # An endpoint call (not __init__, __supervise__...): its host ends the session
        # once it returned (debugged_call_over) or pauses post-mortem in it.
        _debugged.set((msg, post_mortem, dbg.finish))
        dbg._deferred = True
    dbg.set_trace(frame)


def post_mortem(tb) -> None:
    """The endpoint that hit a breakpoint raised: pause where it raised (in the same
    session, listed at the raising function), until a debugger continues; then the
    session ends and the call fails as it would have (Monarch's post-mortem)."""
    name, rank, coords = _where()
    dbg = RemotePdb(debug_controller_mesh(), name, rank, coords)
    inner = tb
    while inner.tb_next is not None:
        inner = inner.tb_next
    dbg.dynamic_path = _dynamic_source(inner.tb_frame)
    dbg.reset()
    try:
        dbg.interaction(None, tb)
    finally:
        dbg._end()
