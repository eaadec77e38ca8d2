"""Authentication: nothing from a peer without the job's secret is deserialized."""

import os
import pickle
import socket
import time

import pytest
import zmq

from monarch_cy._transport import unix_records, unixsock
from monarch_cy._transport.auth import JobKeys
from monarch_cy._actor.base.state import get_node
from monarch_cy._transport.node import Node
from monarch_cy._transport.protocol import REPLY, pack


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _payload(path):
    return pickle.dumps(_Evil(path))


def _targets(echo):
    node = get_node()
    echo.ping.call(0).get(10)      # every socket is bound
    return [node.addr, echo._procs[0], echo._addrs[1]]   # controller, a proc, an actor


def _dropped(s) -> bool:
    """True once the peer closes or resets the connection (within 5 s)."""
    end = time.monotonic() + 5
    s.settimeout(0.2)
    try:
        while time.monotonic() < end:
            try:
                if not s.recv(4096):
                    return True
            except socket.timeout:
                continue
    except (ConnectionResetError, BrokenPipeError):
        return True
    finally:
        s.close()
    return False


def _seqpacket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    s.connect(path)
    return s


def test_default_transport_is_unix(echo):
    assert all(a.startswith(unixsock.SCHEME) for a in _targets(echo))


def test_raw_socket_pickle_is_dropped(echo, tmp_path):
    """Every way in without the secret: the records are never read as messages."""
    for i, addr in enumerate(_targets(echo)):
        path = unixsock.path_of(addr)
        evil = _payload(str(tmp_path / f"pwned{i}"))
        # 1. a stream socket cannot even connect to a seqpacket listener
        st = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with pytest.raises(OSError):
            st.connect(path)
        st.close()
        # 2. no proof: a raw pickle, then well-formed data records (an evil header)
        s = _seqpacket(path)
        s.send(evil)
        assert _dropped(s), f"peer not dropped by {addr}"
        s = _seqpacket(path)
        s.send(b"\x00" + len(evil).to_bytes(2, "little") + evil)
        assert _dropped(s), f"peer not dropped by {addr}"
        # 3. a proof made with another secret, then the evil record
        s = _seqpacket(path)
        s.send(unix_records.proof_record(os.urandom(32), path, unix_records.resolve(path)[1]))
        try:
            s.send(b"\x00" + len(evil).to_bytes(2, "little") + evil)
        except (BrokenPipeError, ConnectionResetError):
            pass                                  # already dropped
        assert _dropped(s), f"forged proof not dropped by {addr}"
        time.sleep(0.1)
        assert not os.listdir(tmp_path), os.listdir(tmp_path)
    assert echo.ping.call(1).get(10).values() == [1] * 4


def test_proof_with_the_secret_is_accepted(echo):
    """Positive control for the test above: the same raw path with the job's secret
    delivers a message (a reply to a port nobody waits on: dropped after decoding)."""
    node = get_node()
    addr = node.addr
    path = unixsock.path_of(addr)
    s = _seqpacket(path)
    s.send(unix_records.proof_record(node.keys.secret, path, unix_records.resolve(path)[1]))
    s.send(b"\x00" + pack((REPLY, 1, 0, True), pickle.dumps(1)))
    s.settimeout(0.5)
    with pytest.raises(socket.timeout):      # still connected: not dropped
        s.recv(1)
    s.close()


class _Counter:
    def __init__(self):
        self.seen = []

    def __call__(self, node, hdr, data, extras):
        self.seen.append(bytes(data))


@pytest.mark.parametrize("mode", ["null", "wrong_key", "public_key_only", "job_key"])
def test_zmq_peer_without_secret_is_refused(tmp_path, mode):
    """The zmq transports (tcp:// between hosts): CurveZMQ + ZAP admit only the job's
    keypair.  A node of its own on loopback; ``job_key`` is the positive control."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    keys = JobKeys()
    node = Node(f"tcp://127.0.0.1:{port}", keys, rundir=str(tmp_path), is_controller=False,
                direct_addr=f"tcp://127.0.0.1:{port + 1 if port < 65535 else port - 1}")
    counter = node.handlers[99] = _Counter()
    node.start_io_thread()
    ctx = zmq.Context()
    path = str(tmp_path / f"{mode}-pwned")
    try:
        s = ctx.socket(zmq.PUSH)
        s.linger = 0
        if mode != "null":
            pub, sec = zmq.curve_keypair()
            s.curve_serverkey = keys.public_z85
            s.curve_publickey = keys.public_z85 if mode != "wrong_key" else pub
            s.curve_secretkey = keys.secret_z85 if mode == "job_key" else sec
        s.connect(node.addr)
        evil = _payload(path)
        for _ in range(3):
            for frame in (len(evil).to_bytes(2, "little") + evil, pack((99,), b"benign")):
                try:
                    s.send(frame, zmq.NOBLOCK)
                except zmq.Again:
                    pass
        time.sleep(0.5)
        if mode == "job_key":
            assert os.path.exists(path) and counter.seen == [b"benign"] * 3
        else:
            assert not os.path.exists(path) and counter.seen == []
    finally:
        ctx.destroy(linger=0)
        node.close()


def test_secret_not_on_command_line_or_env(echo):
    node = get_node()
    secret_hex = node.keys.secret.hex()
    pids = {w[4] for w in echo.whoami.call().get(10).values()}
    for pid in pids:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
        assert secret_hex.encode() not in cmd and secret_hex.encode() not in env
        assert node.keys.secret not in cmd and node.keys.secret_z85 not in env
        assert b"monarch_cy._actor.bootstrap" in cmd
