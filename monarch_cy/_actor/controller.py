"""The controller's node: made on first use, torn down at interpreter exit.

Owns the job: the secret (:class:`JobKeys`), a private run directory for ``ipc://``
socket files (removed at exit), the log sink, and the registry of live procs.  At
exit every proc mesh still running is stopped (STOP, then SIGKILL after a grace
period) and every child is reaped, so no process is left behind.
"""

from __future__ import annotations

import atexit
import shutil
import socket
import threading

from monarch_cy._actor.errors import ActorError
from monarch_cy._transport import node as _transport_node
from monarch_cy._transport.auth import JobKeys
from monarch_cy._transport.node import Node
from monarch_cy._transport.protocol import LOG, SPAWN

__all__ = ["get_node", "make_controller_node", "alloc_addr", "listen_port", "LIVE_PROCS",
           "SINK"]

LIVE_PROCS = {}     # proc key -> _Proc (children of this controller)
STATES = []         # every ProcMesh state, for shutdown
SINK = None
_counter = [0]
_lock = threading.Lock()


def get_node() -> Node:
    """This process's node; in the controller it is made on first use (thread-safe)."""
    node = _transport_node._node
    if node is not None:
        return node
    with _transport_node._node_lock:
        if _transport_node._node is None:
            _transport_node._node = make_controller_node()
        return _transport_node._node


def next_id() -> int:
    with _lock:
        _counter[0] += 1
        return _counter[0]


def transport() -> str:
    """``MONARCH_CY_TRANSPORT``: ``unix`` (default: AF_UNIX seqpacket, see
    :mod:`.unixsock`), ``ipc`` (zmq over ipc://) or ``tcp`` (zmq over loopback)."""
    from monarch_cy import _config
    return _config.transport()


REMOTE_ALLOC = {}   # remote proc key -> fn(tag) -> address on its host (monarch_cy._hosts)


def alloc_addr(node, tag: str, proc_key: str | None = None) -> str:
    """A fresh address for a socket another process (``proc_key``) will bind."""
    alloc = REMOTE_ALLOC.get(proc_key) if proc_key is not None else None
    if alloc is not None:
        return alloc(tag)
    if transport() == "tcp":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return f"tcp://127.0.0.1:{s.getsockname()[1]}"
    return f"{'ipc' if transport() == 'ipc' else 'unix'}://{node.rundir}/{tag}"


_taken = set()      # (host, port) handed out by listen_port in this process


def listen_port(host: str) -> int:
    """A TCP port on ``host`` for a socket of this controller that remote hosts must
    reach (its runtime's inboxes, the named-controller registry, an agent port asked
    as 0): the first port of ``MONARCH_CY_CONTROLLER_PORTS`` that can be bound now and
    was not handed out before by this process, else (variable unset) one the OS
    picks.  The caller binds it soon after.  ``OSError`` (``EADDRINUSE``) naming the
    range when none of it is left."""
    import errno
    from monarch_cy import _config
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


def make_controller_node(host: str | None = None, secret: bytes | None = None) -> Node:
    """The controller's node; ``host``: bind TCP on that address (reachable from other
    machines, see monarch_cy._hosts), on two ports from :func:`listen_port`;
    ``secret``: the job secret (default: random)."""
    global SINK
    from monarch_cy._actor import actor_host, logs
    from monarch_cy._actor.rundir import make_rundir
    if host is not None:        # before anything is made: a full port range raises
        addr, daddr = (f"tcp://{host}:{listen_port(host)}" for _ in range(2))
    rundir = make_rundir()
    keys = JobKeys(secret)
    if host is None and transport() == "tcp":
        addr, daddr = (f"tcp://127.0.0.1:{listen_port('127.0.0.1')}" for _ in range(2))
    elif host is None:
        scheme = "ipc" if transport() == "ipc" else "unix"
        addr, daddr = f"{scheme}://{rundir}/c", f"{scheme}://{rundir}/cd"
    node = Node(addr, keys, rundir=rundir, is_controller=True, direct_addr=daddr,
                remote_error=ActorError)
    SINK = logs.LogSink(node)
    node.handlers[SPAWN] = actor_host.handle_spawn
    node.handlers[LOG] = SINK.handle
    from monarch_cy._actor import heartbeat, supervision
    node.handlers[supervision.SUPERVISE] = supervision.handle_supervise
    node.handlers[supervision.SEEN] = supervision.handle_seen
    node.handlers[supervision.HEARTBEAT_ACK] = heartbeat.handle_ack
    from monarch_cy._actor import controllers, handles
    node.handlers[handles.MESH_CTL] = handles.handle_mesh_ctl
    node.handlers[controllers.CC_ENSURE] = controllers.handle_ensure
    node.start_io_thread()
    atexit.register(_shutdown, node)
    return node


def _shutdown(node) -> None:
    from monarch_cy._actor import supervision
    from monarch_cy._actor.proc_mesh import stop_all
    try:
        if LIVE_PROCS or supervision._pending:
            supervision.flush_at_exit()     # failures nobody handled yet: hook now
        stop_all(grace=2.0)
    finally:
        try:
            node.close()
        finally:
            shutil.rmtree(node.rundir, ignore_errors=True)
