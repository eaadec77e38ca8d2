"""The remote half of ``monarch_cy.job.shell``: an interactive shell on a real pty.

:class:`ShellSession` is an actor, one per shell, on a proc the client spawned for
it.  ``start`` opens a pty, starts ``$SHELL -i`` (``/bin/bash`` when unset) as the
leader of a new session with the pty as its controlling terminal, and returns the
port of its input stream; the pty's output flows to the client's port.  Both
directions are :class:`~.byte_stream.StreamEnd` streams (in order, with
backpressure: a shell whose output the client's stdout does not take blocks on its
own terminal, as on a real one).  ``("resize", rows, columns)`` sets the window size
(the kernel sends SIGWINCH to the foreground job).

Endings:

* The shell exits: its remaining output is sent, then EOF; ``exit_status`` (a
  concurrent endpoint the client calls once) returns its status, ``128 + signal``
  when a signal ended it.
* The client's input ends (EOF): as when a terminal closes, with ``EOF_GRACE`` (2 s)
  for the input typed before it: once the shell's line editor waits for input
  (the terminal is not canonical) it gets the terminal's EOF character (``^D``,
  typed once: an idle interactive shell then exits by itself); whatever still runs
  at the end of the grace is hung up: SIGHUP to every process group of the shell's
  session (foreground and background jobs), then SIGTERM, then SIGKILL,
  ``HANGUP_GRACE`` (1 s) apart, until none is left.  A command still running at
  EOF is therefore ended (a shell hung up exits with 129).  The client's ABORT (its
  terminal failed) hangs up at once.
* ``__cleanup__`` (the actor or its proc stopping) hangs up whatever of the session
  still runs, background jobs included, so nothing is left on the host; the pty
  is closed when the actor's tasks end.

The session owns the pty's master (closed when its session task ends) and the shell;
the shell's environment is the proc's, less the job's secret, plus
``MONARCH_RANK_*``/``MONARCH_SIZE_*`` of this actor's point, the caller's ``env``,
and ``TERM`` from the client.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
import time

from monarch_cy._actor.model.actor import Actor, current_rank
from monarch_cy._actor.model.concurrent import concurrent_endpoint
from monarch_cy._actor.model.endpoint import endpoint
from monarch_cy._actor.model.ports import Channel
from monarch_cy._hosts.byte_stream import CHUNK, StreamEnd
from monarch_cy._transport.secret import ENV, ENV_FILE

__all__ = ["ShellSession", "RESIZE", "HANGUP_GRACE", "EOF_GRACE"]

RESIZE = "resize"
HANGUP_GRACE = 1.0           # seconds between SIGHUP and SIGTERM, SIGTERM and SIGKILL
EOF_GRACE = 2.0              # seconds between the input's EOF and SIGHUP
_OUTPUT_LINGER = 0.2         # after the shell exits: output still in the pty, if any

# Run as the new session's leader (start_new_session): make the pty on fd 0 the
# controlling terminal, then become the shell.
_CTTY = ("import fcntl, os, sys, termios\n"
         "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
         "os.execvp(sys.argv[1], sys.argv[1:])\n")


def set_window_size(fd: int, rows: int, columns: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def _exit_status(returncode: int) -> int:
    return returncode if returncode >= 0 else min(128 - returncode, 255)


class ShellSession(Actor):
    """One interactive shell on a pty of this proc (module docstring)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self._master: int | None = None        # the pty's master; the actor's loop owns it
        self._end: StreamEnd | None = None
        self._exited: asyncio.Event | None = None       # for the actor's loop
        self._gone = threading.Event()                  # the same, for any thread
        self._task: asyncio.Task | None = None
        self._hangup: asyncio.Future | None = None

    @endpoint
    async def start(self, output, env, workdir, client_cwd, term, window_size):
        """Start the shell; return the port its input goes to."""
        if self._process is not None:
            raise RuntimeError("this shell session has started already")
        if workdir is not None and not os.path.isdir(workdir):
            raise FileNotFoundError(f"workdir {workdir!r} is not a directory on this host")
        cwd = workdir if workdir is not None else (
            client_cwd if os.path.isdir(client_cwd) else None)
        point = current_rank()
        child_env = {k: v for k, v in os.environ.items() if k not in (ENV, ENV_FILE)}
        child_env.update({f"MONARCH_RANK_{k}": str(v) for k, v in dict(point).items()})
        child_env.update({f"MONARCH_SIZE_{k}": str(point.size(k)) for k in dict(point)})
        child_env.update(env or {})
        child_env["TERM"] = term
        program = child_env.get("SHELL") or "/bin/bash"

        master, slave = os.openpty()
        try:
            set_window_size(master, *window_size)
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _CTTY, program, "-i"],
                stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=child_env,
                start_new_session=True, close_fds=True)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        self._process, self._master = process, master
        loop = asyncio.get_running_loop()
        self._exited = asyncio.Event()
        threading.Thread(target=self._wait_process, args=(loop,), daemon=True,
                         name=f"shell-{process.pid}").start()
        port, inbox = Channel.open()
        self._end = StreamEnd(output, inbox, on_message=self._message)
        self._end.start(self._write, self._input_ended)
        self._task = asyncio.ensure_future(self._output())
        return port

    @concurrent_endpoint
    async def exit_status(self) -> int:
        """The shell's exit status, once it exited and its output was sent."""
        if self._task is None:
            raise RuntimeError("this shell session was never started")
        return await asyncio.shield(self._task)

    # -- the process ----------------------------------------------------------
    def _wait_process(self, loop) -> None:
        self._process.wait()
        self._gone.set()
        try:
            loop.call_soon_threadsafe(self._exited.set)
        except RuntimeError:                  # the loop closed: the actor is gone
            pass

    def _hang_up(self, first_wait: float = 0.0) -> None:
        """Blocking, from any thread: after ``first_wait`` s (the shell may end by
        itself meanwhile: then nothing is done), HUP, TERM, then KILL the process
        groups of the shell's session (its foreground and background jobs), a grace
        period apart, until no process of the session is left."""
        if first_wait and self._gone.wait(first_wait):
            return
        sid = self._process.pid
        for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGKILL):
            groups = _session_groups(sid)
            if not groups:
                return
            for g in groups:
                try:
                    os.killpg(g, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + HANGUP_GRACE
            while _session_groups(sid) and time.monotonic() < deadline:
                time.sleep(0.02)

    def _start_hang_up(self, first_wait: float = 0.0) -> None:
        if self._hangup is None:
            self._hangup = asyncio.ensure_future(asyncio.to_thread(self._hang_up,
                                                                   first_wait))

    # -- input: the client's keys into the pty ----------------------------------
    async def _write(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        view = memoryview(data)
        while view and self._master is not None:    # after the end, input is moot
            try:
                n = os.write(self._master, view)
            except BlockingIOError:
                await _ready(loop, self._master, write=True)
                continue
            except OSError as e:
                if e.errno == errno.EIO:      # the shell is gone: its input is moot
                    return
                raise
            view = view[n:]

    async def _input_ended(self) -> None:
        """The client's input ended: within ``EOF_GRACE`` s, type the terminal's EOF
        character once the shell's line editor reads (the terminal not canonical: a
        ^D typed while it still is would be dropped when the editor switches), then
        hang up whatever still runs."""
        deadline = time.monotonic() + EOF_GRACE
        typed = False
        while self._master is not None and not self._exited.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not typed:
                try:
                    attrs = termios.tcgetattr(self._master)
                except (OSError, termios.error):
                    break
                if not attrs[3] & termios.ICANON:
                    eof = attrs[6][termios.VEOF]
                    await self._write(eof if isinstance(eof, bytes) else bytes([eof]))
                    typed = True
            try:
                await asyncio.wait_for(self._exited.wait(), min(left, 0.02))
            except asyncio.TimeoutError:
                pass
        if not self._exited.is_set():
            self._start_hang_up()

    def _message(self, msg) -> None:
        if msg[0] == RESIZE and self._master is not None:
            set_window_size(self._master, msg[1], msg[2])

    # -- output: the pty to the client ------------------------------------------
    async def _read(self) -> bytes:
        loop = asyncio.get_running_loop()
        while True:
            try:
                return os.read(self._master, CHUNK)
            except BlockingIOError:
                pass
            except OSError as e:
                if e.errno == errno.EIO:          # every slave fd closed
                    return b""
                raise
            if self._exited.is_set():
                # the shell is gone; a background job may hold the pty open
                try:
                    await asyncio.wait_for(_ready(loop, self._master), _OUTPUT_LINGER)
                except asyncio.TimeoutError:
                    return b""
            else:
                ready = asyncio.ensure_future(_ready(loop, self._master))
                exited = asyncio.ensure_future(self._exited.wait())
                try:
                    await asyncio.wait((ready, exited),
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for t in (ready, exited):
                        t.cancel()
                    await asyncio.gather(ready, exited, return_exceptions=True)

    async def _output(self) -> int:
        """The session's task: output to the client until the shell is gone; its
        exit status.  Closes the pty (also when the actor's stop cancels it)."""
        watch = asyncio.ensure_future(self._watch_input())
        try:
            try:
                await self._end.pump(self._read)
            except ConnectionAbortedError:    # the client gave up: _watch_input hangs up
                pass
            except Exception:
                self._start_hang_up()
                raise
            await self._exited.wait()
            return _exit_status(self._process.returncode)
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
            await self._end.close()
            master, self._master = self._master, None
            if master is not None:
                os.close(master)

    async def _watch_input(self) -> None:
        """Hang up at once when the input stream breaks (the client's ABORT)."""
        try:
            await self._end.sink_done()
        except Exception:  # noqa: BLE001 - any break of the input ends the session
            self._start_hang_up()

    async def __cleanup__(self, exc) -> None:
        # monarch_cy runs __cleanup__ on a helper thread of its own, the actor's loop
        # waiting meanwhile, and cancels the loop's tasks after it (_output's finally
        # then closes the pty): only the blocking, thread-safe hang-up is done here.
        if self._process is not None:
            await asyncio.to_thread(self._hang_up)


def _session_groups(sid: int) -> set:
    """The process groups of the live (not zombie) processes of session ``sid``
    (read from ``/proc``; where it cannot be read, the session leader's group)."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        pids = None
    if pids is None:
        try:
            os.killpg(sid, 0)
            return {sid}
        except OSError:
            return set()
    groups = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue
        # after the command: state, ppid, pgrp, session
        if len(fields) > 3 and fields[0] != b"Z" and int(fields[3]) == sid:
            groups.add(int(fields[2]))
    groups.discard(os.getpgrp())
    return {g for g in groups if g > 1}


async def _ready(loop, fd: int, write: bool = False) -> None:
    """Wait until ``fd`` is readable (or writable)."""
    fut = loop.create_future()
    add, remove = ((loop.add_writer, loop.remove_writer) if write
                   else (loop.add_reader, loop.remove_reader))
    add(fd, lambda: fut.done() or fut.set_result(None))
    try:
        await fut
    finally:
        remove(fd)
