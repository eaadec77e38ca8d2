"""``shell(host_mesh)``: an interactive shell on the one host of a host mesh.

``shell(host_mesh_singleton, *, env=None, workdir=None) -> int`` blocks until the
remote shell exits and returns its exit status (``128 + n`` when signal ``n`` ended
it).  It spawns a proc on the host, starts a :class:`~.shell_session.ShellSession`
there (``$SHELL -i`` on a real pty; the module docstring there says how the shell
starts and ends), copies this process's ``sys.stdin`` to the shell's terminal and
the terminal's output to ``sys.stdout``, and stops the proc before returning or
raising, whatever happened: nothing is left running on the host.

* ``host_mesh_singleton`` must have exactly one host (``ValueError`` otherwise,
  before anything starts); slice a larger mesh first.
* ``env``: extra environment variables of the shell (``dict`` of ``str``);
  ``workdir``: its working directory on the host (default: this process's working
  directory when that exists there, else the proc's).
* When stdin is a terminal it is put in raw mode for the session (keys such as
  ``^C`` go to the remote shell, not to this process) and restored after; the
  window size follows this terminal's (SIGWINCH, where shell() runs in the main
  thread).  stdin and stdout may also be pipes or files: input is typed into the
  remote terminal as it comes, and at its EOF the terminal gets its EOF character
  and, if the shell still runs a second later, is hung up (the shell ends with
  status 129, or what its foreground job makes of SIGHUP).
* Output is written to stdout's file descriptor as it arrives, all of it before
  shell() returns; a failure to write it (``BrokenPipeError`` when nobody reads
  stdout) hangs the remote shell up and is raised.  Input and output each have at
  most 4 MiB in flight (:mod:`.byte_stream`).
* From inside a running event loop, shell() still blocks (it runs its own loop in
  a helper thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import select
import signal
import sys
import termios
import threading
import tty

from monarch_cy._actor.model.ports import Channel
from monarch_cy._hosts.byte_stream import CHUNK, StreamEnd
from monarch_cy._hosts.shell_session import RESIZE, ShellSession

__all__ = ["shell"]

_EOF_WAIT = 10.0      # after the exit status: the rest of the output, at most this long


def shell(host_mesh_singleton, *, env: dict | None = None,
          workdir: str | None = None) -> int:
    """Run an interactive shell on the one host of ``host_mesh_singleton``, wired to
    this process's stdin and stdout; return its exit status (module docstring)."""
    size = host_mesh_singleton.size()
    if size != 1:
        raise ValueError(f"shell needs a singleton HostMesh (one host), not a mesh of "
                         f"{size} hosts; slice it to one host first")
    if env is not None and (not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise TypeError(f"env must be a dict of str to str, not {env!r}")
    if workdir is not None:
        if not isinstance(workdir, (str, os.PathLike)):
            raise TypeError(f"workdir must be a path, not {workdir!r}")
        workdir = os.fspath(workdir)
    stdin_fd, stdout_fd = _fileno(sys.stdin, "stdin"), _fileno(sys.stdout, "stdout")
    sys.stdout.flush()
    return _blocking(_shell, host_mesh_singleton, env, workdir, stdin_fd, stdout_fd)


def _shell(host_mesh, env, workdir, stdin_fd: int, stdout_fd: int) -> int:
    procs = host_mesh.spawn_procs()
    try:
        session = procs.spawn("shell", ShellSession)
        return asyncio.run(_session(session, env, workdir, stdin_fd, stdout_fd))
    finally:
        procs.stop().get()


def _fileno(stream, name: str) -> int:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError) as e:
        raise ValueError(f"shell needs sys.{name} with a file descriptor; it is "
                         f"{stream!r} ({e})") from None


def _blocking(fn, *args):
    """``fn(*args)`` here, or in a helper thread when this thread runs an event loop
    (``fn`` blocks, and runs a loop of its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn(*args)
    out: dict = {}

    def target() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - raised again in the caller
            out["error"] = e
    t = threading.Thread(target=target, name="monarch-shell")
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def _window_size(*fds: int) -> tuple[int, int]:
    for fd in fds:
        try:
            size = os.get_terminal_size(fd)
            return size.lines, size.columns
        except OSError:
            continue
    return 24, 80


async def _session(session, env, workdir, stdin_fd: int, stdout_fd: int) -> int:
    output, inbox = Channel.open()
    try:
        port = await session.start.call_one(
            output, env, workdir, os.getcwd(), os.environ.get("TERM", "xterm-256color"),
            _window_size(stdin_fd, stdout_fd))
    except BaseException:
        inbox.close()
        raise
    end = StreamEnd(port, inbox)
    status = session.exit_status.call_one()
    writer = _Worker("monarch-shell-stdout")
    with _raw_terminal(stdin_fd), _on_resize(end, stdin_fd, stdout_fd):
        try:
            return await _forward(end, status, _Stdin(stdin_fd), writer, stdout_fd)
        finally:
            writer.stop()
            await end.close()


async def _forward(end: StreamEnd, status, stdin: "_Stdin", writer: "_Worker",
                   stdout_fd: int) -> int:
    async def write(data: bytes) -> None:
        await writer.run(_write_all, stdout_fd, data)

    async def no_eof() -> None:       # stdout is not ours to close
        pass

    async def exit_status() -> int:
        return await status

    end.start(write, no_eof)
    pump = asyncio.ensure_future(end.pump(stdin.read))
    sink = asyncio.ensure_future(end.sink_done())
    ended = asyncio.ensure_future(exit_status())
    tasks = {pump, sink, ended}
    try:
        pending = set(tasks)
        while ended in pending:
            done, pending = await asyncio.wait(pending,
                                               return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if t.exception() is not None:
                    raise t.exception()
        # the output's EOF left before the status: wait for the rest of the output
        if not sink.done():
            await asyncio.wait_for(asyncio.shield(sink), _EOF_WAIT)
        return ended.result()
    except BaseException as e:
        end.abort(f"the client's terminal failed: {type(e).__name__}: {e}")
        raise
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        stdin.close()


# -- this process's terminal ------------------------------------------------------------

@contextlib.contextmanager
def _raw_terminal(fd: int):
    if not os.isatty(fd):
        yield
        return
    saved = termios.tcgetattr(fd)
    tty.setraw(fd, termios.TCSADRAIN)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def _on_resize(end: StreamEnd, *fds: int):
    """Send the window size on SIGWINCH (only where this thread may take signals)."""
    loop = asyncio.get_running_loop()

    def resized() -> None:
        try:
            end.send_message((RESIZE, *_window_size(*fds)))
        except Exception:  # noqa: BLE001 - the session is ending
            pass
    previous = signal.getsignal(signal.SIGWINCH)
    try:
        loop.add_signal_handler(signal.SIGWINCH, resized)
    except (RuntimeError, ValueError):      # not the main thread
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGWINCH)
        signal.signal(signal.SIGWINCH, previous if previous is not None else signal.SIG_DFL)


class _Stdin:
    """Reads of fd ``fd`` that never block the loop: readiness from the loop where
    the fd can be polled (pipes, terminals, sockets), else reads in a daemon thread
    (regular files, ``/dev/null``: their reads do not wait)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._watching = False
        try:
            self._loop.add_reader(fd, lambda: None)
            self._loop.remove_reader(fd)
            self._pollable = True
        except (OSError, ValueError):
            self._pollable = False
        self._thread = None if self._pollable else _Worker("monarch-shell-stdin")

    async def read(self) -> bytes:
        if not self._pollable:
            return await self._thread.run(os.read, self._fd, CHUNK)
        while True:
            fut = self._loop.create_future()
            self._loop.add_reader(self._fd, lambda: fut.done() or fut.set_result(None))
            self._watching = True
            try:
                await fut
            finally:
                self._loop.remove_reader(self._fd)
                self._watching = False
            try:
                return os.read(self._fd, CHUNK)
            except BlockingIOError:
                continue

    def close(self) -> None:
        if self._watching:
            self._loop.remove_reader(self._fd)
        if self._thread is not None:
            self._thread.stop()


class _Worker:
    """One daemon thread running blocking calls in order for a loop (a call stuck
    on a stuck file never holds up the loop nor the interpreter's exit)."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    async def run(self, fn, *args):
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queue.put((loop, fut, fn, args))
        return await fut

    def stop(self) -> None:
        self._queue.put(None)

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            loop, fut, fn, args = item
            try:
                result, error = fn(*args), None
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
                result, error = None, e
            with contextlib.suppress(RuntimeError):          # the loop has closed
                loop.call_soon_threadsafe(_settle, fut, result, error)


def _settle(fut, result, error) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])
