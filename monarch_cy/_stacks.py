"""A process's Python stacks, read from outside it with py-spy.

What ``ProcMesh.dump_stacks()`` and ``monarch-cy stacks`` return for each proc: a
:class:`ProcStacks` (its rank, pid, host and every thread's :class:`ThreadStack`, the
innermost :class:`Frame` first), or the reason that proc could not be read in its
``error``.

Why py-spy (as Monarch's mesh admin uses), and not ``faulthandler`` or
``sys._current_frames()``: those run *inside* the target, so they need its
cooperation -- a thread that takes a signal or a message, runs Python and holds the
GIL.  A proc that hangs is exactly one that may not: an endpoint stuck in C code
holding the GIL (a ctypes ``PyDLL`` call, a C extension that never releases it, a
NCCL wait) stops every other thread of that proc, including the one that would
answer.  py-spy reads the interpreter's memory from another process
(``process_vm_readv``, briefly pausing the target with ptrace so the stacks are
consistent), so it needs nothing of the target: a proc spinning in Python, sleeping
in C or holding the GIL forever is answered alike, and nothing is killed or
interrupted.  The price: ptrace permission.  monarch_cy's procs name their
controller (or host agent) as their tracer at start (Yama's ``PR_SET_PTRACER``, in
:mod:`monarch_cy._actor.bootstrap`), so under ``kernel.yama.ptrace_scope`` 0 or 1 (the usual
defaults) the py-spy the controller runs may attach; with scope 2 it needs
``CAP_SYS_PTRACE``, with 3 nothing may.  :func:`dump` raises
:class:`~monarch_cy.errors.StackDumpError` naming these when py-spy is refused.

The process that asks (the controller) reads its *own* threads in-process
(:func:`own_stacks`): it is running Python when it asks, and a child py-spy may not
trace its parent under Yama scope 1.

The py-spy binary: ``$PYSPY_BIN`` (Monarch's variable), else the ``py-spy`` beside
this interpreter (a virtual environment's ``bin``), else ``py-spy`` on ``PATH``.

Flat: imports only the standard library and the error tree.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field

from monarch_cy._errors import StackDumpError

__all__ = ["Frame", "ThreadStack", "ProcStacks", "dump", "own_stacks", "pyspy_path",
           "format_stacks"]

@dataclass(frozen=True)
class Frame:
    """One Python frame: the function's (qualified) name, its file and line."""

    name: str
    filename: str
    line: int

    def __str__(self) -> str:
        return f"{self.name} ({os.path.basename(self.filename) or self.filename}:{self.line})"


@dataclass(frozen=True)
class ThreadStack:
    """One thread: its name, ids, whether it was running (``active``) and held the
    GIL, and its frames, innermost first (empty: a thread with no Python frame)."""

    name: str
    thread_id: int
    os_thread_id: int | None
    active: bool
    owns_gil: bool
    frames: tuple = ()

    def __str__(self) -> str:
        state = ("active" if self.active else "idle") + ("+gil" if self.owns_gil else "")
        head = f'Thread {self.os_thread_id or self.thread_id} ({state}): "{self.name}"'
        return "\n".join([head] + [f"    {f}" for f in self.frames])


@dataclass(frozen=True)
class ProcStacks:
    """Every thread of one proc, read at one moment; or ``error``: why it could not
    be read (the proc exited, py-spy timed out...).  ``rank``: the proc's rank in
    the mesh that was asked."""

    rank: int
    pid: int | None
    host: str
    threads: tuple = ()
    error: str | None = None
    label: str = field(default="", compare=False)    # e.g. the proc mesh's name

    def functions(self) -> set:
        """The names of every frame of every thread (what a test or a script looks for)."""
        return {f.name for t in self.threads for f in t.frames}

    def to_dict(self) -> dict:
        """A JSON-ready dict (``monarch-cy stacks --json``)."""
        return {"label": self.label, "rank": self.rank, "pid": self.pid, "host": self.host,
                "error": self.error,
                "threads": [{"name": t.name, "thread_id": t.thread_id,
                             "os_thread_id": t.os_thread_id, "active": t.active,
                             "owns_gil": t.owns_gil,
                             "frames": [{"name": f.name, "filename": f.filename,
                                         "line": f.line} for f in t.frames]}
                            for t in self.threads]}

    def __str__(self) -> str:
        who = f"{self.label} " if self.label else ""
        head = f"--- {who}rank {self.rank} (pid {self.pid}, host {self.host}) ---"
        if self.error is not None:
            return f"{head}\n    ({self.error})"
        return "\n".join([head] + [str(t) for t in self.threads])


def format_stacks(stacks) -> str:
    """The text of several :class:`ProcStacks` (a ``ValueMesh`` of them or any
    iterable), in rank order, separated by blank lines."""
    items = stacks.values() if hasattr(stacks, "values") else stacks
    return "\n\n".join(str(s) for s in items)


def pyspy_path() -> str:
    """The py-spy to run (see the module docstring); ``StackDumpError`` when none."""
    chosen = os.environ.get("PYSPY_BIN")
    if chosen:
        if not (os.path.isfile(chosen) and os.access(chosen, os.X_OK)):
            raise StackDumpError(f"PYSPY_BIN={chosen!r} is not an executable file")
        return chosen
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("py-spy")
    if found:
        return found
    raise StackDumpError("py-spy is not installed: `pip install py-spy` in this "
                         "environment (monarch_cy depends on it), or set PYSPY_BIN to "
                         "its path")


def _ptrace_scope() -> str | None:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return f.read().strip()
    except OSError:
        return None


def _permission_error(pid: int, why: str) -> StackDumpError:
    scope = _ptrace_scope()
    now = f" (it is {scope} here)" if scope is not None else ""
    return StackDumpError(
        f"py-spy may not read process {pid}: {why}. py-spy needs ptrace permission "
        f"over the proc: run the controller as the same user as its procs, with "
        f"kernel.yama.ptrace_scope 0 or 1{now} (`sudo sysctl kernel.yama."
        f"ptrace_scope=1`), or give py-spy CAP_SYS_PTRACE (`sudo setcap "
        f"cap_sys_ptrace+ep {pyspy_path()}`; in a container: `--cap-add SYS_PTRACE`)")


_DENIED = ("permission denied", "operation not permitted", "eperm")


def dump(pid: int, *, rank: int = 0, host: str | None = None,
         timeout: float = 10.0) -> ProcStacks:
    """Every thread's stack of process ``pid``, read by py-spy (blocks up to
    ``timeout`` seconds; the target is paused for the few ms of the read, then
    resumes).  A process that exited or that py-spy could not read in time gives a
    :class:`ProcStacks` with ``error`` set; py-spy missing or refused by ptrace
    raises :class:`~monarch_cy.errors.StackDumpError` (it would be refused for every
    proc alike)."""
    host = host or socket.gethostname()
    exe = pyspy_path()
    try:
        r = subprocess.run([exe, "dump", "--pid", str(pid), "--json"],
                           capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return ProcStacks(rank, pid, host, error=f"py-spy did not read it within "
                                                 f"{timeout:g} s")
    except OSError as e:
        raise StackDumpError(f"cannot run py-spy ({exe}): {e}") from None
    if r.returncode != 0:
        lines = [ln.strip() for ln in (r.stderr or r.stdout).splitlines() if ln.strip()]
        why = lines[0] if lines else f"exit status {r.returncode}"
        if why.lower().startswith("error:"):
            why = why[6:].strip()
        if not os.path.exists(f"/proc/{pid}"):
            return ProcStacks(rank, pid, host, error="the process has exited")
        if any(d in (r.stderr or "").lower() for d in _DENIED):
            raise _permission_error(pid, why)
        return ProcStacks(rank, pid, host, error=f"py-spy failed: {why}")
    try:
        threads = tuple(_thread(t) for t in json.loads(r.stdout))
    except (ValueError, KeyError, TypeError) as e:
        return ProcStacks(rank, pid, host, error=f"py-spy's output could not be read: {e}")
    return ProcStacks(rank, pid, host, threads)


def _thread(t: dict) -> ThreadStack:
    return ThreadStack(t.get("thread_name") or "", int(t["thread_id"]),
                       t.get("os_thread_id"), bool(t.get("active")),
                       bool(t.get("owns_gil")),
                       tuple(Frame(f["name"], f.get("filename") or "", int(f.get("line") or 0))
                             for f in t.get("frames") or ()))


def own_stacks(rank: int = 0) -> ProcStacks:
    """This process's threads, read in-process (``sys._current_frames``): the
    asking process is running Python, so it needs no py-spy (see above).  The
    threads reading stacks right now (``monarch_cy-stacks``) are left out."""
    import threading
    names = {t.ident: (t.name, t.native_id) for t in threading.enumerate()}
    me = threading.get_ident()
    threads = []
    for ident, frame in sys._current_frames().items():
        name, native = names.get(ident, ("", None))
        if name == "monarch_cy-stacks":
            continue
        frames = []
        while frame is not None:
            code = frame.f_code
            frames.append(Frame(getattr(code, "co_qualname", code.co_name),
                                code.co_filename, frame.f_lineno or 0))
            frame = frame.f_back
        threads.append(ThreadStack(name, ident, native, ident == me, ident == me,
                                   tuple(frames)))
    return ProcStacks(rank, os.getpid(), socket.gethostname(), tuple(threads))
