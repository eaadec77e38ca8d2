"""Every byte a proc writes to fds 1 and 2: read by the controller (or, for a proc on
another host, by its agent), printed with its rank, kept in a file, and its last
lines kept for the proc's failure.

Why the controller reads, not the proc: a proc that redirected its own fds to a pipe
read by a thread of its own would lose what that thread had not yet read when it is
SIGKILLed (OOM killer, a segfault, ``kill -9``); a pipe outlives its writer, so the
reader in another process still gets every byte the proc wrote before it died, and
reads them before the proc's exit is processed.  It also costs the proc nothing: no
thread, no wake-up, one ``write(2)`` per line.  (Procs on other hosts, started by
their host agent, get the same FIFOs on their host; the agent reads them and sends
the bytes here, where :meth:`ProcOutput.feed` takes them: see
:mod:`monarch_cy._hosts.proc_capture`.)

Per proc incarnation, :class:`ProcOutput` makes two FIFOs in the run directory
(``<tag>.out``, ``<tag>.err``); the proc opens them as its fds 1 and 2 before it
imports anything (fork and exec starts alike, any ``bootstrap_command``), and its
child processes inherit them.  FIFOs rather than ``pipe()``: the fork server, not
the controller, forks the procs, and a path is all it needs to be handed.  The
controller opens each read end (non-blocking, 1 MiB of pipe buffer where allowed)
and also holds a write end, so that "no writer yet" never reads as end-of-file; the
controller's pump reads whenever there is data, splits lines (a line longer than
64 KiB is cut), and for each line:

* hands it to the log sink (:mod:`..host.log_sink`: printed ``[who rank] text``,
  or aggregated), unless the mesh streams nothing to the client;
* appends it to the proc's log file, ``<run dir>/logs/<mesh name>-<mesh id>.<rank>.log``
  (every incarnation of that rank appends to it; written as printed);
* keeps it among the last ``MONARCH_CY_TAIL_LOG_LINES`` lines (stdout and stderr
  together), which a failure of the proc carries (:func:`tail_of`).

When the proc exits (in the pump, before its exit is reported to anyone), what is
left in both FIFOs is read and held aggregated lines of its mesh are printed, so the
proc's last lines reach the controller before its failure does; then the
controller's write ends are closed, and the read ends once the proc's children have
closed theirs too.  The FIFOs are removed then; the log file stays.

The log files go with the run directory: removed when the controller exits, unless
a proc failed during the run (:func:`note_failure`) and ``MONARCH_CY_KEEP_FAILED_LOGS``
is on (default): then ``<run dir>/logs`` is moved to
``$TMPDIR/monarch_cy-logs-<run dir's name>`` by the controller's exit or, if the
controller was killed, by the run directory's reaper (:mod:`.rundir`).
"""

from __future__ import annotations

import collections
import fcntl
import os
import threading

from monarch_cy import _config
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.host.logs import SEP, TAG
from monarch_cy._actor.launch.rundir import kept_logs_dir
from monarch_cy._log import logger
from monarch_cy._transport.unix_records import unlink_quietly

__all__ = ["ProcOutput", "make_fifos", "read_ready", "tail_of", "note_failure", "drain_all",
           "flush_after_cells", "keep_logs_if_failed", "LOGS", "FAILED"]

LOGS = "logs"                      # the folder of log files in the run directory
FAILED = ".failed"                 # in it: a proc failed, keep the folder at exit
_MAX_LINE = 64 * 1024
_F_SETPIPE_SZ = 1031
_LIVE = set()                      # ProcOutputs whose FIFOs are open (pump only)
_live_lock = threading.Lock()


#: How many last lines a failure carries when MONARCH_CY_TAIL_LOG_LINES is unset.
DEFAULT_TAIL_LINES = 20


def tail_lines() -> int:
    """The last lines a proc's failure carries: ``MONARCH_CY_TAIL_LOG_LINES``; unset,
    ``DEFAULT_TAIL_LINES``, or Monarch's 0 in a Monarch program (``monarch_cy.compat``
    installed), whose failure texts then stay Monarch's."""
    n = _config.tail_log_lines()
    if n is not None:
        return n
    import sys  # deferred: import time (read once per proc start)
    compat = sys.modules.get("monarch_cy.compat")
    return 0 if compat is not None and compat.installed() else DEFAULT_TAIL_LINES


def make_fifos(rundir: str, tag: str) -> tuple:
    """The two FIFOs of one proc incarnation, ``<rundir>/<tag>.out`` and ``.err``:
    ``(paths, {read fd: stream}, [held write fds])``.  The read ends are
    non-blocking, with 1 MiB of pipe buffer where allowed; the held write ends keep
    "no writer yet" from reading as end-of-file.  Used here and by host agents."""
    paths = (os.path.join(rundir, f"{tag}.out"), os.path.join(rundir, f"{tag}.err"))
    fds, hold = {}, []
    for stream, path in zip(("stdout", "stderr"), paths):
        unlink_quietly(path)             # left by an incarnation that never started
        os.mkfifo(path, 0o600)
        r = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.fcntl(r, _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass                         # over /proc/sys/fs/pipe-max-size: keep 64 KiB
        hold.append(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))
        fds[r] = stream
    return paths, fds, hold


def read_ready(fd: int):
    """What a non-blocking read end holds now: bytes, ``b""`` at end of file (or a
    read error), None when it holds nothing yet."""
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None
    except OSError:
        return b""


class ProcOutput:
    """The output of one proc incarnation (see the module docstring).  Made in the
    thread that starts the proc; everything else runs in ``node``'s pump.
    ``stdio``: the FIFO paths, for the proc's config.  ``fifos=False``: a proc on a
    remote host, whose agent reads its FIFOs and sends the bytes here
    (:meth:`feed`); ``stdio`` is then None."""

    def __init__(self, node, mesh_id: int, mesh_name: str, rank: int, tag: str,
                 fifos: bool = True) -> None:
        self.node, self.mesh_id, self.rank = node, mesh_id, rank
        rundir = node.rundir
        self._fds, self._hold = {}, []
        self._partial = {"stdout": b"", "stderr": b""}
        self.stdio = None
        if fifos:
            self.stdio, self._fds, self._hold = make_fifos(rundir, tag)
        os.makedirs(os.path.join(rundir, LOGS), mode=0o700, exist_ok=True)
        self.path = os.path.join(rundir, LOGS, f"{mesh_name}-{mesh_id}.{rank}.log")
        self._file = open(self.path, "ab")
        self.tail = collections.deque(maxlen=tail_lines())
        self.exited = False
        if fifos:
            with _live_lock:
                _LIVE.add(self)
        for r in self._fds:
            node.watch_fd(r, self._readable)

    # -- in the pump ----------------------------------------------------------------
    def _readable(self, fd: int) -> bool:
        if fd not in self._fds:
            return False
        data = read_ready(fd)
        if data is None:
            return True
        if data:
            self._take(self._fds[fd], data)
            self._file.flush()
            return True
        self._eof(fd)
        return False

    def feed(self, stream: str, data: bytes) -> None:
        """Bytes the proc wrote to ``stream`` (``"stdout"``/``"stderr"``), read by its
        host's agent (in the pump; a remote proc's output, in the order written)."""
        if self._file.closed:            # its children wrote after it exited
            self._file = open(self.path, "ab")
        self._take(stream, data)
        self._file.flush()

    def _take(self, stream: str, data: bytes) -> None:
        buf = self._partial[stream] + data
        *lines, rest = buf.split(b"\n")
        while len(rest) > _MAX_LINE:
            lines.append(rest[:_MAX_LINE])
            rest = rest[_MAX_LINE:]
        self._partial[stream] = rest
        for raw in lines:
            self._line(stream, raw)

    def _line(self, stream: str, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace")
        who, rank = "proc", self.rank
        if text.startswith(TAG):
            parts = text[1:].split(SEP, 2)
            if len(parts) == 3 and parts[1].isdigit():
                who, rank, text = parts[0], int(parts[1]), parts[2]
        shown = f"[{who} {rank}] {text}"
        self.tail.append(shown)
        self._file.write(shown.encode("utf-8", "replace") + b"\n")
        sink = _state.log_sink()
        if sink is not None:
            sink.line(self.mesh_id, stream, who, rank, text)

    def drain(self) -> None:
        """Read what the FIFOs hold now (without waiting)."""
        for fd in list(self._fds):
            while fd in self._fds:
                data = read_ready(fd)
                if not data:
                    break                # nothing now, or end of file (its watch closes)
                self._take(self._fds[fd], data)
        self._file.flush()

    def _flush_partial(self, stream: str) -> None:
        if self._partial[stream]:        # its last line had no newline
            raw, self._partial[stream] = self._partial[stream], b""
            self._line(stream, raw)

    def at_exit(self) -> None:
        """The proc exited (in the pump, before its exit is reported): read its last
        output, print its mesh's held lines, let go of the write ends."""
        if self.exited:
            return
        self.exited = True
        self.drain()
        for stream in self._partial:
            self._flush_partial(stream)
        self._file.flush()
        sink = _state.log_sink()
        if sink is not None:
            sink.flush(self.mesh_id)
        for w in self._hold:
            os.close(w)
        self._hold = []
        if self.stdio is None:           # remote: its agent sent everything before
            self._file.close()
            return
        for path in self.stdio:
            unlink_quietly(path)

    def _eof(self, fd: int) -> None:
        self._flush_partial(self._fds.pop(fd))
        self.node.after_turn(lambda: os.close(fd))   # once the pump has let go of it
        if not self._fds:
            self._file.close()
            with _live_lock:
                _LIVE.discard(self)

    def close_unstarted(self) -> None:
        """The proc was never started (its start raised): drop everything (any
        thread)."""
        def close():
            self.at_exit()
        self.node.call_in_pump(close)


def tail_of(handle) -> list:
    """The last lines the proc of ``handle`` (a launcher handle) wrote, oldest first
    (empty when its output is not captured here or the tail is off); in the pump."""
    out = getattr(handle, "output", None)
    if out is None:
        return []
    if not out.exited:
        out.drain()                      # a silent proc, not dead yet
    return list(out.tail)


def note_failure(handle) -> None:
    """The proc of ``handle`` failed: keep the run's log files at exit."""
    out = getattr(handle, "output", None)
    if out is None:
        return
    try:
        open(os.path.join(out.node.rundir, LOGS, FAILED), "a").close()
    except OSError:
        pass


def drain_all() -> None:
    """Read every capture's FIFOs now (in the pump)."""
    with _live_lock:
        live = list(_LIVE)
    for out in live:
        out.drain()


def _after_cell(_result=None) -> None:
    """After a Jupyter cell: what the procs wrote while it ran is printed in it."""
    sink = _state.log_sink()
    if sink is None:
        return
    done = threading.Event()

    def flush():
        try:
            drain_all()
            sink.flush()
        finally:
            done.set()
    sink.node.call_in_pump(flush)
    done.wait(3.0)


def flush_after_cells() -> None:
    """In an IPython kernel: read and print the procs' output at the end of every
    cell (Monarch flushes its log client there too), so that lines written during a
    call show in the cell that made it, not in the next one."""
    import sys  # deferred: only to find IPython
    ipython_mod = sys.modules.get("IPython")
    if ipython_mod is None:
        return
    try:
        ip = ipython_mod.get_ipython()
    except Exception:  # noqa: BLE001 - no usable IPython: nothing to hook
        return
    if ip is not None and getattr(ip, "events", None) is not None:
        ip.events.register("post_run_cell", _after_cell)


def keep_logs_if_failed(rundir: str) -> None:
    """At the controller's exit: if a proc failed (and ``MONARCH_CY_KEEP_FAILED_LOGS``
    is on), move ``<run dir>/logs`` to :func:`.rundir.kept_logs_dir` and say where
    (the run directory itself is then removed)."""
    logs = os.path.join(rundir, LOGS)
    if not _config.keep_failed_logs() or not os.path.exists(os.path.join(logs, FAILED)):
        return
    import shutil  # deferred: only at an exit after a failure
    dest = kept_logs_dir(rundir)
    try:
        shutil.move(logs, dest)
    except OSError as e:
        logger("actor").warning("cannot keep the procs' log files (%s): %s", logs, e)
        return
    logger("actor").warning("a proc failed: its output and its mesh-mates' is kept "
                            "in %s", dest)
