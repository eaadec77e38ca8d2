"""The controller's run directory and the reaper that removes it.

Every controller makes one private directory (``mkdtemp``: mode 0700, so another
local user cannot connect to the sockets in it) holding the ``unix://`` sockets
and shared-memory names of the job, on a tmpfs where there is one
(:func:`base_dir`).  The controller removes it when it exits
normally (``atexit``).  It cannot when it is SIGKILLed, so the directory also has
a *reaper*: a tiny interpreter (``python -I -S``, no imports beyond ``os`` and
``shutil``; in its own session, so a terminal's Ctrl-C does not reach it) that
blocks reading a pipe whose write end only the controller holds (close-on-exec,
so no proc inherits it).  The kernel closes that end when the controller dies,
however it dies; the reaper then removes the directory and exits.  The procs
exit on their own when the controller dies (they watch its pid), whatever the
start mode, so nothing is left behind.

If a proc failed during the run, the procs' log files (``<run dir>/logs``) are moved
to :func:`kept_logs_dir` first, by the controller's exit or by the reaper.

The reaper is started once per controller, in the background of the call that
made the directory; it costs one short-lived process and no work on any path
the user waits on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from monarch_cy import _config
from monarch_cy._log import logger

__all__ = ["make_rundir", "base_dir", "reaper_pids", "kept_logs_dir"]

_REAPER = (
    "import os, shutil, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "try:\n"
    "    while os.read(0, 4096):\n"
    "        pass\n"
    "except OSError:\n"
    "    pass\n"
    "logs = os.path.join(sys.argv[1], 'logs')\n"
    "if len(sys.argv) > 2 and os.path.exists(os.path.join(logs, '.failed')):\n"
    "    try:\n"
    "        shutil.move(logs, sys.argv[2])\n"
    "    except OSError:\n"
    "        pass\n"
    "shutil.rmtree(sys.argv[1], ignore_errors=True)\n"
)

_reapers = []          # the Popen objects: their stdin (the pipe) stays open


def base_dir() -> str | None:
    """Where run directories are made (``None``: the system's temporary directory):
    ``MONARCH_CY_RUN_DIR``; else ``$TMPDIR`` when set (the user chose); else
    ``/dev/shm`` when it is a tmpfs this process can write, because every proc binds
    two sockets and links there, and on a disk file system (ext4 here) creating them
    for 1,024 procs cost about 2 s of the spawn in the kernel's inode allocator."""
    chosen = _config.run_dir()
    if chosen:
        return chosen
    if os.environ.get("TMPDIR"):
        return None
    return "/dev/shm" if _writable_tmpfs("/dev/shm") else None


def _writable_tmpfs(path: str) -> bool:
    try:
        with open("/proc/self/mounts") as f:
            mounted = any(p[1] == path and p[2] == "tmpfs"
                          for p in (line.split() for line in f) if len(p) > 2)
    except OSError:
        return False
    return mounted and os.access(path, os.W_OK | os.X_OK)


def make_rundir(prefix: str = "mcy-") -> str:
    """Create the run directory (mode 0700, under :func:`base_dir`) and start its
    reaper; returns the path."""
    path = tempfile.mkdtemp(prefix=prefix, dir=base_dir())
    keep = [kept_logs_dir(path)] if _config.keep_failed_logs() else []
    try:
        popen = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER, path, *keep], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
            start_new_session=True)
    except OSError as e:     # no room for a process: the directory still works
        logger("actor").warning("cannot start the run directory's reaper (%s); %s "
                                "will be left behind if this process is killed", e, path)
        return path
    _reapers.append(popen)
    return path


def kept_logs_dir(rundir: str) -> str:
    """Where the procs' log files of ``rundir`` go when a proc failed
    (``MONARCH_CY_KEEP_FAILED_LOGS``): ``monarch_cy-logs-<run dir's name>`` in the
    system's temporary directory (not the run directory's tmpfs)."""
    return os.path.join(tempfile.gettempdir(),
                        f"monarch_cy-logs-{os.path.basename(rundir)}")


def reaper_pids() -> list:
    """Pids of this process's reapers (they live as long as the process does)."""
    return [p.pid for p in _reapers]
