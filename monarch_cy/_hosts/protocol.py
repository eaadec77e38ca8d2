"""Controller <-> agent messages, heartbeats and connection diagnostics.

Transport: one zmq connection per agent, CurveZMQ with the job's keys on both ends
(:class:`monarch_cy._transport.auth.JobKeys`), the server side's ZAP handler bound
before the socket.  A peer without the secret fails the CURVE handshake (or ZAP);
libzmq then drops it and nothing it sent is ever delivered, so the pickled frames
below are only ever read from peers that proved they hold the secret.

* listening agent (``--listen``): the agent binds a ROUTER, the controller connects
  one DEALER per agent;
* dialing agent (``--connect``, SLURM and Kubernetes): the controller binds one
  ROUTER, every agent connects a DEALER to it.

Messages are pickled tuples, first item the kind:

controller -> agent: ``(HELLO, {"ip": str|None, "timeout": s})``, ``(SPAWN, key,
cfg, env)``, ``(KILL, key)``, ``(STACKS, request id, key, rank, timeout)``
(:mod:`.remote_stacks`), ``(HB,)``, ``(BYE,)``, ``(SHUTDOWN,)`` (the host mesh that
owns this host was shut down: kill every proc and exit, as Monarch's workers do).
agent -> controller: ``(HELLO, info)``, ``(STARTED, key, pid)``, ``(OUTPUT, key,
stream, bytes)`` (what the proc wrote to fd 1 or 2, :mod:`.proc_capture`), ``(EXIT,
key, code)``, ``(ERROR, key, message)``, ``(STACKS, request id, ok, value)``,
``(HB,)``.

Heartbeats: each side sends ``HB`` every ``timeout / 5`` seconds and counts the
other lost after ``timeout`` seconds without any message (default 10 s,
``MONARCH_CY_HOST_TIMEOUT``).  A dropped connection does not count by itself (zmq
reconnects): an agent that was killed says nothing more and is lost at the timeout;
an agent that stops on its own says ``BYE`` first and is lost at once.

Replay: none of these messages carries a proof of its own.  What a peer could
capture -- the CURVE handshake and the boxes after it -- cannot be replayed: each
connection's handshake is keyed by short-term keys both ends draw fresh (the server's
cookie key too), so captured HELLO/INITIATE commands start nothing on a new
connection, and a MESSAGE box opens only under its session's keys, with nonces that
must increase.

Refusals (a failed handshake, a ZAP refusal) are logged through :data:`REFUSALS`:
the first few per minute, then one line with the count (the agent's and the host
hub's loops call :meth:`RateLimited.flush`; closing flushes what is left).
"""

from __future__ import annotations

import logging
import pickle
import socket

from monarch_cy import _config
from monarch_cy._log import RateLimited

__all__ = ["HELLO", "SPAWN", "KILL", "HB", "BYE", "STARTED", "OUTPUT", "EXIT", "ERROR",
           "STACKS", "SHUTDOWN",
           "dumps", "loads", "host_timeout", "parse_tcp", "local_ip_towards",
           "log_refusal", "REFUSALS", "Monitor", "DEFAULT_PORT", "DEFAULT_PROC_PORTS",
           "log", "interface_ip", "is_loopback"]

HELLO, SPAWN, KILL, HB, BYE, STARTED, OUTPUT, EXIT, ERROR, STACKS, SHUTDOWN = (
    "hello", "spawn", "kill", "hb", "bye", "started", "output", "exit", "error", "stacks",
    "shutdown")

DEFAULT_PORT = 26600                 # an agent's --listen port / a controller's agent port
DEFAULT_PROC_PORTS = (26601, 27600)  # ports the procs of one host bind (inclusive)

log = logging.getLogger("monarch_cy.hosts")
REFUSALS = RateLimited(log, "refused connections")    # this process's, all sockets


def dumps(msg: tuple) -> bytes:
    return pickle.dumps(msg, 5)


def loads(frame) -> tuple:
    return pickle.loads(frame)


def host_timeout() -> float:
    """Seconds without a message after which a host (or the controller) is lost
    (``MONARCH_CY_HOST_TIMEOUT``, default 10; :mod:`monarch_cy._config`)."""
    return _config.host_timeout()


def parse_tcp(addr: str, what: str = "address") -> tuple[str, int]:
    """``(host, port)`` of ``tcp://host:port``; ``ValueError`` naming ``addr``."""
    if not isinstance(addr, str):
        raise TypeError(f"{what} must be a str like 'tcp://host:port', not {addr!r}")
    if not addr.startswith("tcp://"):
        raise ValueError(f"{what} {addr!r} must look like 'tcp://host:port'")
    host, sep, port = addr[6:].rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} {addr!r} must look like 'tcp://host:port' with a port "
                         "in 1..65535")
    return host, int(port)


def resolve(host: str) -> str:
    """An IPv4 address for ``host`` (a name or an address)."""
    try:
        return socket.gethostbyname(host)
    except OSError as e:
        raise ValueError(f"cannot resolve host {host!r}: {e}") from None


def local_ip_towards(host: str) -> str:
    """This machine's address on the route to ``host`` (no packet is sent)."""
    ip = resolve(host)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((ip, 9))
        return s.getsockname()[0]


def interface_ip(name: str, what: str = "interface") -> str:
    """The IPv4 address of network interface ``name`` on this machine; ``ValueError``
    (naming ``what`` and ``name``, and the interfaces there are) when it does not
    exist or has no IPv4 address."""
    import fcntl
    import struct
    names = [n for _, n in socket.if_nameindex()]
    if name not in names:
        raise ValueError(f"{what}={name!r}: no such network interface on this machine "
                         f"(it has {', '.join(names)})")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            req = struct.pack("256s", name.encode()[:15])
            got = fcntl.ioctl(s.fileno(), 0x8915, req)      # SIOCGIFADDR
        except OSError:
            raise ValueError(f"{what}={name!r}: the interface has no IPv4 "
                             "address") from None
    return socket.inet_ntoa(got[20:24])


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is a loopback address; False for one
    that does not resolve."""
    import ipaddress
    try:
        return ipaddress.ip_address(resolve(host)).is_loopback
    except ValueError:
        return False


def log_refusal(peer: str) -> None:
    """``on_refused`` for :meth:`JobKeys.handle_zap`: a host's refusals are logged
    with the peer's address, at a bounded rate (:data:`REFUSALS`)."""
    REFUSALS.log("refused a connection from %s: not a member of this job", peer)


class Monitor:
    """Connection events of one socket: did TCP connect, did the handshake fail."""

    def __init__(self, sock, name: str, *, server: bool = False) -> None:
        import zmq
        self.name = name
        self.server = server
        self.sock = sock.get_monitor_socket(
            zmq.EVENT_CONNECTED | zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED |
            zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL |
            zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        self.connected = False       # TCP reached the peer at least once
        self.handshakes = 0
        self.failed = 0
        self.disconnects = 0

    def drain(self) -> list[str]:
        """Process pending events; returns their kinds ('up', 'down', 'refused')."""
        import zmq
        from zmq.utils.monitor import recv_monitor_message
        out = []
        while True:
            try:
                ev = recv_monitor_message(self.sock, zmq.NOBLOCK)
            except zmq.Again:
                return out
            e = ev["event"]
            if e in (zmq.EVENT_CONNECTED, zmq.EVENT_ACCEPTED):
                self.connected = True
            elif e == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.handshakes += 1
                out.append("up")
            elif e == zmq.EVENT_DISCONNECTED:
                self.disconnects += 1
                out.append("down")
            elif e in (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                       zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
                       zmq.EVENT_HANDSHAKE_FAILED_AUTH):
                self.failed += 1
                out.append("refused")
                if self.server:
                    REFUSALS.log("refused a connection on %s: CURVE handshake failed "
                                 "(the peer does not hold this job's secret)", self.name)

    def close(self) -> None:
        self.sock.close(linger=0)
