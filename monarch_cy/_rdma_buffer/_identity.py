"""Who and where a process is: host, pid namespace, job fingerprint, process start time.

* ``host_id()`` -- ``hostname|boot_id``, from :mod:`monarch_cy._host_identity` (its one
  home; the collectives' mesh uses the same): two processes with equal host ids run
  on the same booted kernel under the same hostname, so GPU IPC handles can work.
* ``pidns()`` -- inode of ``/proc/self/ns/pid``: cross-memory attach needs the owner's
  pid to mean the same process for the reader, i.e. the same pid namespace.
* ``job_fingerprint()`` -- 16 bytes derived from the job's CurveZMQ public key (the
  runtime draws one secret per job and every proc of the job holds it).  A handle
  carries its owner's fingerprint; any other job's processes refuse it.  The public
  key is not secret, so this guards against mistakes (a handle saved by another
  run), not against an attacker, who could not reach our sockets anyway.
* ``start_time(pid)`` -- field 22 of ``/proc/<pid>/stat``; with the pid it names one
  process even after pid reuse.
"""

from __future__ import annotations

import functools
import os

from monarch_cy._host_identity import host_id

__all__ = ["host_id", "pidns", "job_fingerprint", "start_time", "this_proc_key"]


@functools.lru_cache(maxsize=1)
def pidns() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


_job = None


def job_fingerprint() -> bytes:
    """This job's fingerprint (creates the process's actor node in the controller)."""
    global _job
    if _job is None:
        from monarch_cy._actor.base.state import get_node
        _job = get_node().keys.fingerprint(b"monarch_cy.rdma job")
    return _job


def this_proc_key() -> str:
    from monarch_cy._actor.base.state import get_node
    return get_node().key


def start_time(pid: int) -> int | None:
    """Start time (clock ticks since boot) of process ``pid``; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return int(data.rsplit(b")", 1)[1].split()[19])
