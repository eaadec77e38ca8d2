"""Which host a process runs on: one id that every process of a host agrees on.

``host_id()`` is ``"<hostname>|<boot_id>"``:

* ``boot_id`` (``/proc/sys/kernel/random/boot_id``) is drawn by the kernel at every
  boot, so processes under one running kernel share it (containers on that kernel
  too) and two machines in practice never do.  Where it cannot be read the id says
  ``no-boot-id``.
* ``hostname`` (``socket.gethostname()``, the UTS namespace's node name) tells apart
  hosts that share one kernel on purpose: the fake hosts of tests and benchmarks
  (:mod:`monarch_cy._hosts.netns`) are network namespaces, each with its own UTS
  namespace and hostname, and must count as different hosts.

Equal ids: the two processes share a kernel and a hostname, so they may use the
same-host paths (GPU IPC handles, cross-memory attach, a rendezvous on 127.0.0.1,
local ranks).  Different ids: treat them as different hosts, which is always safe
(the paths that work between hosts work on one host too).  Who compares ids:

* :mod:`monarch_cy._collectives._mesh` -- whether every member of a group runs on
  one host, and which members are local to each other (``LOCAL_RANK``);
* :mod:`monarch_cy._rdma_buffer` -- an RDMA buffer's handle carries its owner's id;
  a reader compares it with its own to choose ``ipc``/``cma`` or a remote backend.

Ids are compared only between processes of one job, which all run this module,
so the format may change between versions of monarch_cy but never within a job.

The boot id is read once per process (it cannot change while the process lives);
the hostname is read at every call (one ``uname`` system call), so that processes
of one host agree at any moment, also when the host is renamed while a job runs.
"""

from __future__ import annotations

import functools
import socket

__all__ = ["host_id", "hostname_of", "SEPARATOR", "NO_BOOT_ID"]

SEPARATOR = "|"                 # hostnames never contain it
NO_BOOT_ID = "no-boot-id"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"


@functools.lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        with open(_BOOT_ID) as f:
            return f.read().strip() or NO_BOOT_ID
    except OSError:
        return NO_BOOT_ID


def host_id() -> str:
    """This process's host id, ``"<hostname>|<boot_id>"`` (see the module docstring)."""
    return f"{socket.gethostname()}{SEPARATOR}{_boot_id()}"


def hostname_of(host: str) -> str:
    """The hostname part of a :func:`host_id` (for messages)."""
    return host.split(SEPARATOR, 1)[0]
