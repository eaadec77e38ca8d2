"""The job file: how a second terminal finds a running controller and proves it
belongs to the job (``monarch-cy stacks``).

Every controller writes ``job.json`` into its run directory when its node starts
(:func:`write`): its pid, its inbox address, the host, when it started, its command
line, and the job secret as hex.  The file is mode 0600 inside the run directory,
which is itself 0700 (:mod:`.rundir`), so only the controller's own user can read
it -- the user who may already ptrace the controller and read the secret from its
memory, so the file gives nobody anything new.  A tool that reads it becomes a peer
of the job the same way procs and agents are: it proves the secret on every
connection (``unix://`` HMAC proofs, CurveZMQ over TCP), and the controller reads
nothing from a connection before that proof.  The file goes with the run directory
(removed at exit, or by the reaper when the controller is killed).

:func:`find` lists the running jobs of this user on this host: every
``mcy-*/job.json`` under the run directories' base (:func:`.rundir.base_dir`) whose
controller is alive.
"""

from __future__ import annotations

import glob
import json
import os
import socket
import sys
import tempfile
import time

from monarch_cy._actor.launch.rundir import base_dir

__all__ = ["NAME", "write", "load", "find", "search_dir", "pid_alive"]

NAME = "job.json"


def write(rundir: str, addr: str, secret: bytes) -> str:
    """Write the job file of the controller (this process) into ``rundir``; returns
    its path.  Never raises: a job that cannot write it still runs (only
    ``monarch-cy stacks`` cannot find it)."""
    path = os.path.join(rundir, NAME)
    doc = {"pid": os.getpid(), "addr": addr, "host": socket.gethostname(),
           "started": time.time(), "argv": sys.argv[:4], "rundir": rundir,
           "secret": secret.hex()}
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
    except OSError:
        pass
    return path


def load(path: str) -> dict:
    """The job file at ``path`` (a run directory or the file itself) as a dict;
    ``ValueError`` naming the path when it is absent or not a job file."""
    if os.path.isdir(path):
        path = os.path.join(path, NAME)
    try:
        with open(path) as f:
            doc = json.load(f)
        doc["secret"] = bytes.fromhex(doc["secret"])
        int(doc["pid"]), str(doc["addr"])
    except OSError as e:
        raise ValueError(f"cannot read the job file {path!r}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{path!r} is not a monarch_cy job file") from None
    doc["path"] = path
    doc.setdefault("rundir", os.path.dirname(path))
    return doc


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def search_dir() -> str:
    """Where :func:`find` looks: the run directories' base."""
    return base_dir() or tempfile.gettempdir()


def find() -> list:
    """The running jobs of this user here, newest first (dicts as :func:`load`)."""
    out = []
    for path in glob.glob(os.path.join(search_dir(), "mcy-*", NAME)):
        try:
            if os.stat(path).st_uid != os.getuid():
                continue
            doc = load(path)
        except (OSError, ValueError):
            continue
        if pid_alive(int(doc["pid"])):
            out.append(doc)
    out.sort(key=lambda d: d.get("started", 0), reverse=True)
    return out
