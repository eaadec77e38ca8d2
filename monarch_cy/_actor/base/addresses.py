"""Addresses for sockets this job's processes bind: which scheme, which path or port.

``alloc_addr`` picks the address of a socket another process will bind (a proc's
inboxes, an actor's socket); ``listen_port`` picks a TCP port on this machine that
remote hosts must reach.  Remote procs (:mod:`monarch_cy._hosts`) get their
addresses from their host's agent through :data:`REMOTE_ALLOC`.
"""

from __future__ import annotations

import errno
import threading

from monarch_cy import _config

__all__ = ["transport", "alloc_addr", "listen_port", "REMOTE_ALLOC"]

REMOTE_ALLOC: dict = {}   # remote proc key -> fn(tag) -> address on its host
_taken = set()            # (host, port) handed out by listen_port in this process
_lock = threading.Lock()


def transport() -> str:
    """``MONARCH_CY_TRANSPORT``: ``unix`` (default: AF_UNIX seqpacket), ``ipc`` (zmq
    over ipc://) or ``tcp`` (zmq over loopback)."""
    return _config.transport()


def alloc_addr(node, tag: str, proc_key: str | None = None) -> str:
    """A fresh address for a socket another process (``proc_key``) will bind."""
    alloc = REMOTE_ALLOC.get(proc_key) if proc_key is not None else None
    if alloc is not None:
        return alloc(tag)
    if transport() == "tcp":
        import socket  # deferred: import time (only tcp:// picks ports)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return f"tcp://127.0.0.1:{s.getsockname()[1]}"
    return f"{'ipc' if transport() == 'ipc' else 'unix'}://{node.rundir}/{tag}"


def listen_port(host: str) -> int:
    """A TCP port on ``host`` for a socket of this controller that remote hosts must
    reach (its runtime's inboxes, the named-controller registry, an agent port asked
    as 0): the first port of ``MONARCH_CY_CONTROLLER_PORTS`` that can be bound now and
    was not handed out before by this process, else (variable unset) one the OS
    picks.  The caller binds it soon after.  ``OSError`` (``EADDRINUSE``) naming the
    range when none of it is left."""
    import socket  # deferred: import time (only a controller remote hosts reach)
    rng = _config.controller_ports()
    if rng is None:
        with socket.socket() as s:
            s.bind((host, 0))
            return s.getsockname()[1]
    lo, hi = rng
    with _lock:
        for port in range(lo, hi + 1):
            if (host, port) in _taken:
                continue
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
            _taken.add((host, port))
            return port
    raise OSError(errno.EADDRINUSE,
                  f"no free port left in MONARCH_CY_CONTROLLER_PORTS={lo}-{hi} on {host}: "
                  f"all {hi - lo + 1} are in use or already taken by this controller "
                  "(it needs 3: its actor runtime's two and the named-controller "
                  "registry's, plus a job's agent port given as 0); widen the range")
