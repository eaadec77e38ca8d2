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
* The client's input ends (EOF): the terminal's EOF character (``^D``) is typed,
  as at the end of a script piped into a terminal; a shell that is still running
  ``HANGUP_GRACE`` seconds later is hung up as when a terminal closes: SIGHUP to its
  process group and the terminal's foreground group, then SIGTERM, then SIGKILL,
  each a grace period apart.  The client's ABORT hangs up at once.
* ``__cleanup__`` (the actor or its proc stopping) hangs up what still runs and
  closes the pty.

The session owns the pty's master (closed in ``__cleanup__``) and the shell process;
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

from monarch_cy._actor.model.actor import Actor, current_rank
from monarch_cy._actor.model.concurrent import concurrent_endpoint
from monarch_cy._actor.model.endpoint import endpoint
from monarch_cy._actor.model.ports import Channel
from monarch_cy._hosts.byte_stream import CHUNK, StreamEnd
from monarch_cy._transport.secret import ENV, ENV_FILE

__all__ = ["ShellSession", "RESIZE", "HANGUP_GRACE"]

RESIZE = "resize"
HANGUP_GRACE = 1.0           # seconds between EOF and SIGHUP, SIGHUP and SIGTERM, ...
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
        self._master: int | None = None
        self._end: StreamEnd | None = None
        self._exited: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._hangup: asyncio.Task | None = None

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
        try:
            loop.call_soon_threadsafe(self._exited.set)
        except RuntimeError:                  # the loop closed: the actor is gone
            pass

    def _groups(self) -> set:
        groups = {self._process.pid}
        try:
            groups.add(os.tcgetpgrp(self._master))
        except OSError:
            pass
        groups.discard(os.getpgrp())
        return {g for g in groups if g > 1}

    async def _hang_up(self, first_wait: float = 0.0) -> None:
        """HUP, TERM, KILL the shell's groups, a grace period apart, until it exits."""
        if first_wait:
            await self._wait_exit(first_wait)
        groups = self._groups() if self._master is not None else {self._process.pid}
        for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGKILL):
            if self._process.returncode is not None and not _alive(groups):
                return
            for g in groups:
                try:
                    os.killpg(g, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            await self._wait_exit(HANGUP_GRACE)

    async def _wait_exit(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._exited.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    # -- input: the client's keys into the pty ----------------------------------
    async def _write(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        view = memoryview(data)
        while view:
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
        try:
            eof = termios.tcgetattr(self._master)[6][termios.VEOF]
        except (OSError, termios.error):
            eof = b"\x04"
        await self._write(eof if isinstance(eof, bytes) else bytes([eof]))
        if self._hangup is None:
            self._hangup = asyncio.ensure_future(self._hang_up(HANGUP_GRACE))

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
                await asyncio.wait((ready, exited), return_when=asyncio.FIRST_COMPLETED)
                for t in (ready, exited):
                    t.cancel()

    async def _output(self) -> int:
        watch = asyncio.ensure_future(self._watch_input())
        try:
            await self._end.pump(self._read)
        except ConnectionAbortedError:        # the client gave up: _watch_input hangs up
            pass
        except Exception:
            if self._hangup is None:
                self._hangup = asyncio.ensure_future(self._hang_up())
            raise
        finally:
            watch.cancel()
        await self._exited.wait()
        return _exit_status(self._process.returncode)

    async def _watch_input(self) -> None:
        """Hang up at once when the input stream breaks (the client's ABORT)."""
        try:
            await self._end.sink_done()
        except Exception:  # noqa: BLE001 - any break of the input ends the session
            if self._hangup is None:
                self._hangup = asyncio.ensure_future(self._hang_up())

    async def __cleanup__(self, exc) -> None:
        if self._process is not None and self._process.returncode is None:
            await self._hang_up()
        for t in (self._hangup, self._task):
            if t is not None and not t.done():
                t.cancel()
                await asyncio.gather(t, return_exceptions=True)
        if self._end is not None:
            await self._end.close()
        if self._master is not None:
            try:
                os.close(self._master)
            except OSError:
                pass
            self._master = None


def _alive(groups) -> bool:
    for g in groups:
        try:
            os.killpg(g, 0)
            return True
        except ProcessLookupError:
            continue
        except PermissionError:
            return True
    return False


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
