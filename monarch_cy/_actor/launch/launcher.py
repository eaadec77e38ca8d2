"""Starting procs: a fork server ("zygote") per controller, or one exec per proc.

Default (``MONARCH_CY_START=fork``): the first ``spawn_procs`` starts one zygote,
``monarch_cy._actor.bootstrap`` (see :func:`_default_argv`), which imports the runtime once
and then forks a worker per request.  A fork costs a few ms instead of a fresh
interpreter (~130 ms of imports); the zygote is single-threaded and never creates a
zmq context or imports torch, so forking it is safe.  Each child sets its whole
environment (per-rank ``CUDA_VISIBLE_DEVICES``...) before running anything else.

``MONARCH_CY_START=exec``: one such bootstrap per proc.

Either way the job secret travels through a stdin pipe, never argv or environ.
Children are started from one long-lived "launcher" thread: the kernel's
parent-death signal (``PR_SET_PDEATHSIG``, set by the zygote and the workers) fires
when the *thread* that forked them exits, so it must be one that lives as long as
the controller.  ``PYTHONPATH`` is set from the controller's ``sys.path``, so that
the bootstrap finds the controller's ``monarch_cy`` even when the controller got it
through ``sys.path`` manipulation rather than an install.
The zygote reports each fork (``forked <id> <pid>``) and each exit
(``exit <pid> <status>``) on a status pipe that the controller's pump reads: that
is where proc deaths are seen (exec mode uses a pidfd per child instead).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

from monarch_cy import _config
from monarch_cy._log import logger

__all__ = ["start_proc", "prestart", "ProcHandle", "shutdown_zygote", "arm_exit"]


class ProcHandle:
    """A started proc: ``pid``, ``kill()``, ``poll()``, ``wait(timeout)``."""

    def __init__(self) -> None:
        self.pid = None
        self.returncode = None
        self._started = threading.Event()
        self._exited = threading.Event()
        self._on_exit = None
        self.popen = None
        self.pidfd = None       # fork mode: the worker's pidfd, open while it runs
        self.output = None      # its proc_output.ProcOutput (fds 1 and 2), if captured

    def kill(self) -> None:
        if self.popen is not None:
            self.popen.kill()
            return
        self._started.wait(5)
        if self.pid is not None and self.returncode is None:
            try:
                os.kill(self.pid, 9)
            except ProcessLookupError:
                pass

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired("proc", timeout)
        return self.returncode

    def _exit(self, code: int) -> None:
        if self.output is not None:
            self.output.at_exit()     # its last lines first, then its exit
        self.returncode = code
        self._exited.set()
        cb = self._on_exit
        if cb is not None:
            cb(code)


# ``python -m`` puts the working directory first on ``sys.path``, ahead of the
# controller's paths in ``PYTHONPATH``: a ``monarch_cy`` folder there (a source
# checkout beside an installed wheel) would be the one the procs import.  The
# default bootstrap drops that entry before importing anything of ours, so procs run
# the controller's monarch_cy; the name stays in the command line (tools and tests
# find procs by it).
_BOOT = ("import sys; del sys.path[0]; "
         "from monarch_cy._actor.bootstrap import main; main()")


def _default_argv() -> list:
    """The default proc (or zygote) command: this Python running the bootstrap."""
    return [sys.executable, "-c", _BOOT]


def _child_env(env: dict | None = None) -> dict:
    """``env`` (default ``os.environ``) with ``PYTHONPATH`` led by the controller's
    ``sys.path`` (the cwd made absolute)."""
    out = dict(os.environ if env is None else env)
    paths = []
    for p in sys.path:
        if not isinstance(p, str):
            continue
        p = os.path.abspath(p) if p else os.getcwd()
        if p not in paths:
            paths.append(p)
    old = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    out["PYTHONPATH"] = os.pathsep.join(paths + old)
    return out


class _Launcher:
    """One daemon thread that runs every Popen of this controller (see above)."""

    def __init__(self) -> None:
        import queue
        self.q = queue.Queue()
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name="monarch_cy-launcher")
        self.thread.start()

    def _loop(self) -> None:
        while True:
            fn, box, done = self.q.get()
            try:
                box.append((True, fn()))
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                box.append((False, e))
            done.set()

    def run(self, fn):
        if threading.current_thread() is self.thread:
            return fn()
        box, done = [], threading.Event()
        self.q.put((fn, box, done))
        done.wait()
        ok, v = box[0]
        if not ok:
            raise v
        return v


_launcher = None
_llock = threading.Lock()


def launch(fn):
    """Run ``fn()`` (which starts a child) in the launcher thread; return its result."""
    global _launcher
    if _launcher is None:
        with _llock:
            if _launcher is None:
                _launcher = _Launcher()
    return _launcher.run(fn)


def _mode() -> str:
    """``MONARCH_CY_START``: ``fork`` (default) or ``exec``."""
    return _config.start_method()


_zygote = None
_zlock = threading.Lock()
_log = logger("actor")


class _ZygoteGone(Exception):
    """The fork server this request went to is dead."""


class _Zygote:
    def __init__(self, zmq: bool = True) -> None:
        r, w = os.pipe()
        os.set_blocking(r, False)
        self.popen = launch(lambda: subprocess.Popen(
            _default_argv(), env=_child_env(),
            stdin=subprocess.PIPE, pass_fds=(w,), close_fds=True, start_new_session=True))
        os.close(w)
        self.status_fd = r
        self.pending = {}       # request id -> handle
        self.by_pid = {}
        self.next_id = 0
        self.lock = threading.Lock()
        self.buf = b""
        self.dead = False
        self._write({"zygote": True, "status_fd": w, "controller_pid": os.getpid(),
                     "zmq": zmq})
        self.node = None        # the node whose pump reads the status pipe

    def watch(self, node) -> None:
        """Read this zygote's reports in ``node``'s pump (once; thread-safe)."""
        with self.lock:
            if self.node is not None:
                return
            self.node = node
        node.watch_fd(self.status_fd, self._readable)

    def _write(self, obj) -> None:
        self.popen.stdin.write(json.dumps(obj).encode() + b"\n")
        self.popen.stdin.flush()

    def fork(self, cfg: dict, env: dict) -> ProcHandle:
        """Ask for one worker; raises :class:`_ZygoteGone` if this zygote is dead
        (the caller starts a new one)."""
        h = ProcHandle()
        with self.lock:
            if self.dead:
                raise _ZygoteGone()
            self.next_id += 1
            self.pending[self.next_id] = h
            try:
                self._write({"id": self.next_id, "cfg": cfg, "env": env})
            except (BrokenPipeError, OSError, ValueError):   # ValueError: pipe closed
                self.pending.pop(self.next_id, None)
                self._forget()
                raise _ZygoteGone() from None
        return h

    def _readable(self, fd) -> bool:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not data:
            self._lost()
            return False
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            parts = line.split()
            if parts[0] == b"forked":
                h = self.pending.pop(int(parts[1]))
                h.pid = int(parts[2])
                try:
                    # Held while it runs: if the zygote dies, this names the worker
                    # even after its pid is reaped by someone else (see _lost).
                    h.pidfd = os.pidfd_open(h.pid)
                except ProcessLookupError:
                    pass                  # already gone: its "exit" line follows
                self.by_pid[h.pid] = h
                h._started.set()
            elif parts[0] == b"exit":
                h = self.by_pid.pop(int(parts[1]), None)
                if h is not None:
                    _close_pidfd(h)
                    h._exit(int(parts[2]))
        return True

    def _forget(self) -> None:
        """This zygote is dead: the next start makes a new one."""
        global _zygote
        self.dead = True
        with _zlock:
            if _zygote is self:
                _zygote = None

    def _lost(self) -> None:
        """In the pump: the zygote is gone (its status pipe closed).  Its workers
        can no longer be watched by it, so each is SIGKILLed through its pidfd and
        its exit (-9, which fails its calls through supervision) is reported once
        the kernel says it is gone -- not before: a dying worker still accepts
        connections on its inbox, and a respawn that reached it there would lose
        what it sent.  Requests never forked are reported at once.  The next start
        makes a new zygote."""
        with self.lock:
            self._forget()
        try:
            os.close(self.status_fd)
        except OSError:
            pass
        for h in list(self.pending.values()):
            h._started.set()
            h._exit(-9)
        for h in list(self.by_pid.values()):
            fd = h.pidfd
            if fd is None:                # it was gone when "forked" was read
                h._exit(-9)
                continue
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                pass                      # exited already; the pidfd is readable

            def gone(_fd, h=h):
                _close_pidfd(h)
                h._exit(-9)
                return False
            self.node.watch_fd(fd, gone)
        self.by_pid.clear()
        self.pending.clear()

    def close(self, timeout: float = 3.0) -> None:
        try:
            self.popen.stdin.close()
        except OSError:
            pass
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def _close_pidfd(h: ProcHandle) -> None:
    fd, h.pidfd = h.pidfd, None
    if fd is not None:
        os.close(fd)



def arm_exit(handle: ProcHandle, callback) -> None:
    """Call ``callback(code)`` when the proc exits -- also if it already has.  Runs
    in the pump (where exits are reported), so the exit cannot slip between setting
    the callback and checking for it: call it there (``node.call_in_pump``)."""
    handle._on_exit = callback
    if handle.returncode is not None:
        callback(handle.returncode)


def start_proc(node, cfg: dict, env: dict, command=None) -> ProcHandle:
    """Start one proc with config ``cfg`` (sent through a pipe) and environment
    ``env``; ``handle._on_exit(code)`` is called in the pump when it exits.
    ``command``: a :class:`~.bootstrap_command.BootstrapCommand` whose program is
    executed instead of this Python (its ``env`` is already in ``env``)."""
    custom = command is not None and not command.is_default_program()
    if custom or _mode() == "exec":
        h = ProcHandle()
        argv = (command.argv() if custom else
                _default_argv())
        program = command.program if custom else sys.executable
        popen = launch(lambda: subprocess.Popen(
            argv, executable=program, stdin=subprocess.PIPE,
            env=_child_env(env), close_fds=True, start_new_session=True))
        popen.stdin.write(json.dumps(cfg).encode() + b"\n")
        popen.stdin.close()
        h.popen, h.pid = popen, popen.pid
        h._started.set()
        node.watch_pid(popen.pid, lambda pid: h._exit(popen.wait()))
        return h
    for attempt in (1, 2):
        z = prestart()
        z.watch(node)
        try:
            return z.fork(cfg, env)
        except _ZygoteGone:
            # The fork server died (killed, OOM): start a new one and ask it.
            _log.warning("the fork server (pid %s) is gone; starting a new one",
                         z.popen.pid)
            if attempt == 2:
                raise RuntimeError("the fork server died twice in a row while starting "
                                   "a proc; set MONARCH_CY_START=exec to start procs "
                                   "without it") from None


def prestart():
    """Start the zygote now (in fork mode) so that it boots while the caller does
    other work; idempotent.  Returns it, or None in exec mode."""
    global _zygote
    if _mode() == "exec":
        return None
    with _zlock:
        if _zygote is None:
            _zygote = _Zygote(zmq=_config.transport() != "unix")
        return _zygote


def shutdown_zygote() -> None:
    global _zygote
    with _zlock:
        z, _zygote = _zygote, None
    if z is not None:
        z.close()
