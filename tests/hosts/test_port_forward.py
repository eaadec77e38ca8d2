"""PortForwarder over real loopback sockets: data both ways with half closes, bounded
in-flight data under backpressure, many connections, per-point ports, resets passed
on, stop, and bad input (each a clear error, nothing left listening)."""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time

import pytest

from monarch_cy.actor import ActorError, this_host, this_proc
from monarch_cy.job import PortForwarder

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def pair():
    pm = this_host().spawn_procs(per_host={"procs": 2})
    yield pm
    pm.stop().get(30)


@pytest.fixture
def forwarder():
    fwd = this_proc().spawn(f"fwd{os.urandom(3).hex()}", PortForwarder)
    yield fwd
    fwd.stop().get(30)


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
            return True
        except OSError:
            return False


class Service:
    """A loopback TCP service: ``handle(conn)`` runs in a thread per connection."""

    def __init__(self, handle) -> None:
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.errors: list = []
        self._handle = handle
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn) -> None:
        try:
            with conn:
                self._handle(conn)
        except Exception as e:  # noqa: BLE001 - the test reads it
            self.errors.append(e)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)     # wakes the accepting thread
        except OSError:
            pass
        self.sock.close()


def echo(conn) -> None:
    while data := conn.recv(65536):
        conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)


def reset(sock) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def connect(port: int, timeout: float = 20) -> socket.socket:
    s = socket.create_connection((HOST, port), timeout=timeout)
    return s


def exchange(port: int, payload: bytes) -> bytes:
    """Send ``payload`` and half-close (from a thread), read until EOF."""
    with connect(port) as s:
        t = threading.Thread(target=lambda: (s.sendall(payload), s.shutdown(socket.SHUT_WR)))
        t.start()
        chunks = []
        while data := s.recv(1 << 20):
            chunks.append(data)
        t.join()
        return b"".join(chunks)


def forward(fwd, pm, dst_port, src_address):
    """A forward from proc 0's ``src_address`` to proc 1's ``dst_port``."""
    fwd.forward.call_one(pm.slice(procs=1), dst_port, pm.slice(procs=0), src_address).get(30)


def test_pf_relays_both_ways_and_passes_half_closes(pair, forwarder):
    svc = Service(echo)
    (src,) = free_ports(1)
    forward(forwarder, pair, svc.port, f"{HOST}:{src}")
    payload = os.urandom(3 << 20)
    assert exchange(src, payload) == payload      # EOF came back: half close passed on
    assert exchange(src, b"") == b""
    assert svc.errors == []
    svc.close()


def test_pf_backpressure_bounds_data_in_flight(pair, forwarder):
    release = threading.Event()
    got = []

    def slow(conn) -> None:
        release.wait(60)
        n = 0
        while data := conn.recv(1 << 20):
            n += len(data)
        got.append(n)
    svc = Service(slow)
    (src,) = free_ports(1)
    forward(forwarder, pair, svc.port, f"{HOST}:{src}")
    with connect(src) as s:
        s.setblocking(False)
        sent, chunk, last = 0, b"x" * 65536, time.monotonic()
        while time.monotonic() - last < 1.5 and sent < (256 << 20):
            _, writable, _ = select.select([], [s], [], 0.2)
            if writable:
                try:
                    n = s.send(chunk)
                except BlockingIOError:
                    continue
                sent += n
                last = time.monotonic()
        # What the pipeline holds once writes stall: socket buffers on each hop plus
        # the relay's 4 MiB window; without flow control it would take everything.
        assert sent < (40 << 20), sent
        release.set()
        s.setblocking(True)
        s.shutdown(socket.SHUT_WR)
        assert s.recv(1) == b""          # the service closed after reading it all
    assert got == [sent]
    svc.close()


def test_pf_many_connections_per_point_ports_and_shared_address(pair, forwarder):
    svc = Service(echo)
    (shared,) = free_ports(1)
    # both procs listen on one address (SO_REUSEPORT), each relays to its own proc
    forwarder.forward.call_one(pair, svc.port, pair, f"{HOST}:{shared}").get(30)
    payloads = [os.urandom(200_000) for _ in range(8)]
    results = [None] * 8

    def run(i: int) -> None:
        results[i] = exchange(shared, payloads[i])
    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == payloads

    # per-point functions: each source port reaches the service of its own point
    def rank_service(rank):
        return Service(lambda conn: conn.sendall(bytes([rank])))
    svcs = [rank_service(r) for r in range(2)]
    ports = [s.port for s in svcs]
    srcs = free_ports(2)
    forwarder.forward.call_one(
        pair, lambda p: ports[p["procs"]], pair,
        lambda p: f"{HOST}:{srcs[p['procs']]}").get(30)
    for rank in range(2):
        for _ in range(3):
            with connect(srcs[rank]) as s:
                assert s.recv(1) == bytes([rank])
    for s in [svc, *svcs]:
        s.close()


def test_pf_resets_travel_both_ways(pair, forwarder):
    seen = []

    def hello_then_reset(conn) -> None:
        conn.sendall(b"hello")
        time.sleep(0.2)
        reset(conn.dup())

    def wait_for_reset(conn) -> None:
        try:
            while conn.recv(65536):
                pass
            seen.append("eof")
        except ConnectionResetError:
            seen.append("reset")
    a, b = Service(hello_then_reset), Service(wait_for_reset)
    src_a, src_b = free_ports(2)
    forward(forwarder, pair, a.port, f"{HOST}:{src_a}")
    forward(forwarder, pair, b.port, f"{HOST}:{src_b}")
    # the service resets: the client reads what was sent, then a reset (not an EOF)
    with connect(src_a) as s:
        data = b""
        with pytest.raises(ConnectionResetError):
            while len(data) < 5 or True:
                chunk = s.recv(65536)
                if not chunk:
                    pytest.fail(f"clean EOF after {data!r}; expected a reset")
                data += chunk
        assert data == b"hello"
    # the client resets: the service sees a reset
    s = connect(src_b)
    s.sendall(b"x")
    time.sleep(0.3)
    reset(s)
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen == ["reset"]
    a.close(), b.close()


def test_pf_stop_closes_listeners_and_resets_open_connections(pair):
    fwd = this_proc().spawn("fwd_stop", PortForwarder)
    svc = Service(echo)
    src = free_ports(2)
    for port in src:
        forward(fwd, pair, svc.port, f"{HOST}:{port}")
    held = connect(src[0])
    held.sendall(b"ping")
    assert held.recv(4) == b"ping"
    fwd.stop().get(30)
    fwd.stop().get(30)                               # idempotent
    for port in src:
        with pytest.raises(ConnectionRefusedError):
            connect(port, timeout=5).close()
        assert bindable(port)
    with pytest.raises(ConnectionResetError):
        held.recv(10)
    held.close()
    svc.close()


# -- bad input: a clear error naming the value, nothing left listening ----------------

def test_pf_destination_not_listening(pair, forwarder):
    closed, src = free_ports(2)
    with pytest.raises(ActorError, match=rf"nothing listens on 127\.0\.0\.1:{closed}"):
        forward(forwarder, pair, closed, f"{HOST}:{src}")
    assert bindable(src)


@pytest.mark.parametrize("address, text", [
    ("localhost", "must look like 'address:port', not 'localhost'"),
    ("127.0.0.1:0", "from 1 through 65535, not 0"),
    ("127.0.0.1:70000", "not 70000"),
    ("127.0.0.1:http", "the port 'http' is not a number"),
    (5678, "must be a string 'address:port', not 5678"),
])
def test_pf_bad_src_address(pair, forwarder, address, text):
    svc = Service(echo)
    with pytest.raises(ActorError, match=text):
        forward(forwarder, pair, svc.port, address)
    svc.close()


@pytest.mark.parametrize("port", [0, 65536, "80", True])
def test_pf_bad_dst_port(pair, forwarder, port):
    (src,) = free_ports(1)
    with pytest.raises(ActorError, match=rf"dst_port must be a TCP port .*not {port!r}"):
        forward(forwarder, pair, port, f"{HOST}:{src}")
    assert bindable(src)


def test_pf_bad_meshes_and_per_point_values(pair, forwarder):
    svc = Service(echo)
    with pytest.raises(ActorError, match="must have the same shape"):
        forwarder.forward.call_one(pair, svc.port, pair.slice(procs=0),
                                   f"{HOST}:1").get(30)
    with pytest.raises(ActorError, match="dst_proc_mesh must be a ProcMesh, not 'x'"):
        forwarder.forward.call_one("x", svc.port, pair, f"{HOST}:1").get(30)
    srcs, port = free_ports(2), svc.port
    with pytest.raises(ActorError, match=r"dst_port at \{'procs': 1\} .*not -1"):
        forwarder.forward.call_one(
            pair, lambda p: port if p["procs"] == 0 else -1, pair,
            lambda p: f"{HOST}:{srcs[p['procs']]}").get(30)
    assert all(bindable(p) for p in srcs)
    svc.close()


def test_pf_source_address_in_use_stops_the_other_sources(pair, forwarder):
    svc = Service(echo)
    srcs = free_ports(2)
    blocker = socket.socket()
    blocker.bind((HOST, srcs[1]))
    blocker.listen()
    try:
        with pytest.raises(ActorError, match=rf"src_address '127\.0\.0\.1:{srcs[1]}': "
                                             "cannot listen there"):
            forwarder.forward.call_one(
                pair, svc.port, pair, lambda p: f"{HOST}:{srcs[p['procs']]}").get(30)
    finally:
        blocker.close()
    assert bindable(srcs[0]) and bindable(srcs[1])   # rank 0's listener was closed
    svc.close()


def test_pf_service_gone_after_forward_resets_the_client(pair, forwarder):
    svc = Service(echo)
    (src,) = free_ports(1)
    forward(forwarder, pair, svc.port, f"{HOST}:{src}")
    svc.close()
    with connect(src, timeout=20) as s:
        with pytest.raises(ConnectionResetError):
            s.recv(1)
