"""The controller's run directory and the reaper that removes it.

Every controller makes one private directory (``mkdtemp``: mode 0700, so another
local user cannot connect to the sockets in it) holding the ``unix://`` sockets
and shared-memory names of the job.  The controller removes it when it exits
normally (``atexit``).  It cannot when it is SIGKILLed, so the directory also has
a *reaper*: a tiny interpreter (``python -I -S``, no imports beyond ``os`` and
``shutil``; in its own session, so a terminal's Ctrl-C does not reach it) that
blocks reading a pipe whose write end only the controller holds (close-on-exec,
so no proc inherits it).  The kernel closes that end when the controller dies,
however it dies; the reaper then removes the directory and exits.  The procs
exit on their own when the controller dies (they watch its pid), whatever the
start mode, so nothing is left behind.

The reaper is started once per controller, in the background of the call that
made the directory; it costs one short-lived process and no work on any path
the user waits on.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

__all__ = ["make_rundir", "reaper_pids"]

_REAPER = (
    "import os, shutil, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "try:\n"
    "    while os.read(0, 4096):\n"
    "        pass\n"
    "except OSError:\n"
    "    pass\n"
    "shutil.rmtree(sys.argv[1], ignore_errors=True)\n"
)

_reapers = []          # the Popen objects: their stdin (the pipe) stays open


def make_rundir(prefix: str = "mcy-") -> str:
    """Create the run directory and start its reaper; returns the path."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        popen = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER, path], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
            start_new_session=True)
    except OSError as e:     # no room for a process: the directory still works
        from monarch_cy._log import logger
        logger("actor").warning("cannot start the run directory's reaper (%s); %s "
                                "will be left behind if this process is killed", e, path)
        return path
    _reapers.append(popen)
    return path


def reaper_pids() -> list:
    """Pids of this process's reapers (they live as long as the process does)."""
    return [p.pid for p in _reapers]
