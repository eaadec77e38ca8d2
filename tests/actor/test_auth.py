"""Authentication: nothing from a peer without the job's secret is deserialized."""

import os
import pickle
import socket
import time

import pytest
import zmq

from monarch_cy._actor.node import REPLY, get_node, pack


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


def test_raw_socket_pickle_is_dropped(echo, tmp_path):
    for i, addr in enumerate(_targets(echo)):
        path = str(tmp_path / f"pwned{i}")
        if addr.startswith("ipc://"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(addr[len("ipc://"):])
        else:
            host, port = addr[len("tcp://"):].rsplit(":", 1)
            s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(_payload(path) * 4)
        dropped = False
        end = time.monotonic() + 5
        try:
            while time.monotonic() < end:
                data = s.recv(4096)
                if not data:
                    dropped = True
                    break
        except (ConnectionResetError, BrokenPipeError):
            dropped = True
        finally:
            s.close()
        assert dropped, f"peer not dropped by {addr}"
        time.sleep(0.1)
        assert not os.path.exists(path)
    assert echo.ping.call(1).get(10).values() == [1] * 4


@pytest.mark.parametrize("mode", ["null", "wrong_key", "public_key_only"])
def test_zmq_peer_without_secret_is_refused(echo, tmp_path, mode):
    node = get_node()
    ctx = zmq.Context()
    paths = []
    try:
        for i, addr in enumerate(_targets(echo)):
            s = ctx.socket(zmq.PUSH)
            s.linger = 0
            if mode != "null":
                pub, sec = zmq.curve_keypair()
                s.curve_serverkey = node.keys.public_z85
                s.curve_publickey = pub if mode == "wrong_key" else node.keys.public_z85
                s.curve_secretkey = sec
            s.connect(addr)
            path = str(tmp_path / f"{mode}{i}")
            paths.append(path)
            evil = _payload(path)
            for _ in range(3):
                try:
                    s.send(pack((REPLY, 1, 0, True), evil), zmq.NOBLOCK)
                except zmq.Again:
                    pass
                try:
                    s.send(pack(("ping", node.addr, 0, 0, node.key), evil), zmq.NOBLOCK)
                except zmq.Again:
                    pass
        time.sleep(0.5)
        assert not any(os.path.exists(p) for p in paths)
    finally:
        ctx.destroy(linger=0)
    assert echo.ping.call(2).get(10).values() == [2] * 4


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
