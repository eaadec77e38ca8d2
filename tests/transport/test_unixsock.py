"""The same-host transport (monarch_cy._transport.unixsock): records, proofs, backlog, close."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from monarch_cy._transport import unix_records
from monarch_cy._transport import unixsock as u


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_every_record_kind_round_trips(pair):
    box, out, _ = pair
    big = os.urandom(200_000)
    cases = [
        [b"one"],
        [b"h", b"x" * 100, bytearray(b"y" * 7)],
        [b"z" * (u.MAX_RECORD - 1)],                 # the largest one-frame record
        [b"z" * u.MAX_RECORD],                       # one byte more: spilled
        [b"head", memoryview(big), b""],             # spilled, several frames
    ]
    for frames in cases:
        assert out.send(frames) is True
        got = box.recv(2000)
        assert [bytes(f) for f in got] == [bytes(f) for f in frames]
        assert isinstance(got[0], bytes)
    with pytest.raises(u.Again):
        box.recv(0)


def test_spilled_frames_are_private_and_leak_no_fds(pair):
    box, out, _ = pair
    out.send([b"warm"])                      # the connection exists before counting
    box.recv(2000)
    before = _fds()
    for _ in range(20):
        out.send([b"h", b"\x01" * 300_000])
        got = box.recv(2000)
        got[1][0] = 7                                # copy-on-write: writable, private
        assert got[1][0] == 7 and got[1][1] == 1
        del got
    assert _fds() == before


def test_send_before_listen_is_kept_in_order(tmp_path):
    secret = os.urandom(32)
    addr = f"unix://{tmp_path}/late"
    out = u.Outlet(addr, secret)
    assert out.send([b"1"]) is False and out.want == "retry"   # caller must arm once
    assert out.send([b"2"]) is True                              # already armed
    assert out.flush() is False                                  # still nobody there
    box = u.Inbox(addr, secret)
    try:
        assert out.flush() is True and not out.armed
        out.send([b"3"])
        assert [box.recv(2000)[0] for _ in range(3)] == [b"1", b"2", b"3"]
    finally:
        out.close()
        box.close()


def test_slow_reader_fills_the_kernel_then_the_backlog_keeps_order(pair):
    box, out, _ = pair
    n, armed = 30_000, 0
    for i in range(n):
        if not out.send([i.to_bytes(4, "little") * 64]):
            armed += 1
    assert armed == 1 and out.want == "write" and out.backlog   # the kernel was full
    got = 0
    while got < n:
        try:
            frames = box.recv(0)
        except u.Again:
            out.flush()
            continue
        assert int.from_bytes(frames[0][:4], "little") == got
        got += 1
    assert out.flush() is True and not out.backlog


def test_replayed_or_misdirected_proof_is_dropped(pair, tmp_path):
    box, out, secret = pair
    proof = unix_records.proof_record(secret, box.path, box.incarnation)

    def attempt(record):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(box.path)
        s.send(record)
        try:
            s.send(b"\x00payload")
        except (BrokenPipeError, ConnectionResetError):
            pass
        return s

    first = attempt(proof)
    assert box.recv(2000) == [b"payload"]                  # the original is accepted
    replay = attempt(proof)                                  # same nonce again
    wrong_path = attempt(unix_records.proof_record(secret, box.path + "x", box.incarnation))
    with pytest.raises(u.Again):
        box.recv(300)
    for s in (replay, wrong_path):
        s.settimeout(2)
        try:
            assert s.recv(16) == b""                         # dropped, unread
        except ConnectionResetError:
            pass                                             # dropped, unread
        s.close()
    first.close()


@pytest.mark.parametrize("record", [
    b"\x07junk",                                             # unknown kind
    b"\x01\x02\x00" + (5).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"short",
    b"\x02\x01\x00" + (10).to_bytes(8, "little"),           # spill without its fd
    b"",                                                     # empty record
])
def test_malformed_record_drops_only_that_connection(pair, record):
    box, out, secret = pair
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(box.path)
    s.send(unix_records.proof_record(secret, box.path, box.incarnation))
    s.send(record)
    out.send([b"still served"])
    assert box.recv(2000) == [b"still served"]
    s.settimeout(2)
    if record:
        assert s.recv(16) == b""
    s.close()


def test_fd_attached_to_a_plain_record_is_closed(pair):
    box, out, secret = pair
    import array
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(box.path)
    s.send(unix_records.proof_record(secret, box.path, box.incarnation))
    out.send([b"warm"])                      # both connections accepted before counting
    assert box.recv(2000) == [b"warm"]
    r, w = os.pipe()
    before = _fds()
    s.sendmsg([b"\x00x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r]))])
    out.send([b"after"])
    assert box.recv(2000) == [b"after"]
    with pytest.raises(u.Again):
        box.recv(200)                        # the bad record is handled by now
    assert _fds() == before - 1      # the passed fd was closed, the bad connection too
    os.close(r)
    os.close(w)
    s.close()


def test_close_interrupts_a_blocked_reader(pair):
    box, _, _ = pair
    err = []

    def reader():
        try:
            box.recv(-1)
        except u.Closed as e:
            err.append(e)

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.1)
    box.close()
    t.join(5)
    assert not t.is_alive() and err
    assert not os.path.exists(box.path)


def test_bad_addresses_are_named():
    with pytest.raises(ValueError, match="tcp://x:1"):
        u.Outlet("tcp://x:1", os.urandom(32))


def test_more_frames_than_one_sendmsg_takes(pair):
    box, out, _ = pair
    frames = [b"h"] + [bytes([i % 256]) * 3 for i in range(1500)]   # > IOV_MAX
    out.send(frames)
    assert [bytes(f) for f in box.recv(2000)] == frames


@pytest.mark.parametrize("nbytes", [50_000, 70_000, 200_000, 300_000])
def test_actor_messages_around_the_record_and_shm_limits(echo, nbytes):
    """Inline (< 60 KiB), spilled to a memfd (60-256 KiB) and shm (>= 256 KiB) paths,
    both directions, data checked."""
    import numpy as np
    one = echo.slice(gpus=1)
    a = np.arange(nbytes // 4, dtype=np.float32)
    assert one.checksum.call_one(a).get(30) == float(a.sum())
    r = one.make_array.call_one(nbytes, 7).get(30)
    assert r.nbytes == nbytes and int(r.min()) == 7 and int(r.max()) == 7


def test_spill_without_memory_is_a_clear_error(pair, monkeypatch):
    import errno
    box, out, _ = pair
    before = _fds()

    def no_space(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(unix_records.os, "write", no_space)
    with pytest.raises(MemoryError, match="200000-byte message"):
        out.send([b"x" * 200_000])
    monkeypatch.undo()
    assert _fds() == before                       # the memfd was closed
    out.send([b"after"])
    assert box.recv(2000) == [b"after"]


def test_call_that_cannot_be_sent_fails_at_the_call_site(echo, monkeypatch):
    from monarch_cy._actor.base.state import get_node
    node = get_node()
    one = echo.slice(gpus=0)
    ports = len(node.port_ids())

    def no_space(fd, data):
        raise OSError(12, "Cannot allocate memory")
    monkeypatch.setattr(unix_records.os, "write", no_space)
    with pytest.raises(MemoryError, match="cannot hold"):
        one.checksum.call_one(bytearray(150_000))           # spilled (60-256 KiB)
    monkeypatch.undo()
    assert len(node.port_ids()) == ports                          # no port left behind
    assert one.ping.call_one(5).get(10) == 5
