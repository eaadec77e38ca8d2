"""The unix:// transport's system calls in C (monarch_cy._transport._unixio), and how
the inbox treats what they report: truncation, descriptors, end of file."""

from __future__ import annotations

import array
import errno
import os
import socket

import pytest

from monarch_cy._transport import unix_records
from monarch_cy._transport import unixsock as u
from monarch_cy._transport._unixio import MAX_FDS, recv_into, send_bufs


@pytest.fixture()
def sp():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_nothing_waiting_is_eagain_not_an_exception(sp):
    _, b = sp
    fds = []
    assert recv_into(b.fileno(), bytearray(16), fds) == -errno.EAGAIN
    assert fds == []


def test_a_record_of_many_buffers_arrives_whole_in_order(sp):
    a, b = sp
    parts = [bytes([i]) * (i + 1) for i in range(20)]      # more than the stack iovec
    assert send_bufs(a.fileno(), [*parts[:10], memoryview(b"".join(parts[10:]))]) == 0
    buf = bytearray(1000)
    n = recv_into(b.fileno(), buf, [])
    assert bytes(buf[:n]) == b"".join(parts)


def test_a_descriptor_travels_with_its_record_and_stays_the_senders(sp):
    a, b = sp
    fd = os.memfd_create("t")
    os.write(fd, b"spilled")
    assert send_bufs(a.fileno(), [b"\x02"], fd) == 0
    os.fstat(fd)                                   # still open on the sending side
    fds = []
    buf = bytearray(8)
    assert recv_into(b.fileno(), buf, fds) == 1 and buf[0] == 2
    assert len(fds) == 1 and fds[0] != fd
    assert os.pread(fds[0], 7, 0) == b"spilled"
    assert os.get_inheritable(fds[0]) is False     # close-on-exec
    os.close(fds[0])
    os.close(fd)


def test_a_record_larger_than_the_buffer_is_emsgsize(sp):
    a, b = sp
    assert send_bufs(a.fileno(), [b"x" * 100]) == 0
    assert recv_into(b.fileno(), bytearray(10), []) == -errno.EMSGSIZE


def test_more_descriptors_than_room_are_returned_for_closing(sp):
    a, b = sp
    pipes = [os.pipe() for _ in range(MAX_FDS + 4)]
    a.sendmsg([b"\x00x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                            array.array("i", [r for r, _ in pipes]))])
    fds = []
    assert recv_into(b.fileno(), bytearray(8), fds) == -errno.EMSGSIZE
    assert 0 < len(fds) <= MAX_FDS                 # what arrived is the caller's
    for f in fds:
        os.close(f)
    for r, w in pipes:
        os.close(r)
        os.close(w)


def test_end_of_file_and_a_gone_peer_are_plain_codes(sp):
    a, b = sp
    b.close()
    assert send_bufs(a.fileno(), [b"late"]) in (-errno.EPIPE, -errno.ECONNRESET)
    a2, b2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    a2.close()
    assert recv_into(b2.fileno(), bytearray(8), []) == 0
    b2.close()


def test_a_closed_or_bad_descriptor_is_ebadf():
    assert recv_into(-1, bytearray(8), []) == -errno.EBADF
    assert send_bufs(-1, [b"x"]) == -errno.EBADF


def test_arguments_that_are_not_buffers_are_refused_by_name(sp):
    a, b = sp
    with pytest.raises(TypeError):
        send_bufs(a.fileno(), [b"ok", 12])
    with pytest.raises(TypeError):
        send_bufs(a.fileno(), (b"not", b"a list"))
    with pytest.raises(BufferError):
        recv_into(b.fileno(), b"read-only", [])
    assert recv_into(b.fileno(), bytearray(8), []) == -errno.EAGAIN   # nothing was sent


def _proven(pair) -> socket.socket:
    inbox, _, secret = pair
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(inbox.path)
    s.send(unix_records.proof_record(secret, inbox.path, inbox.incarnation))
    return s


def test_a_truncated_record_drops_only_its_connection(pair):
    inbox, out, _ = pair
    s = _proven(pair)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    s.send(b"\x00" + b"x" * (u.MAX_RECORD + 100))   # larger than any record we send
    out.send([b"still served"])
    assert inbox.recv(2000) == [b"still served"]
    s.settimeout(2)
    assert s.recv(16) == b""                           # dropped, unread
    s.close()


def test_an_oversized_first_record_is_refused_as_no_proof(pair):
    inbox, out, _ = pair
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    s.connect(inbox.path)
    s.send(b"\x03" + b"p" * (u.MAX_RECORD + 100))
    out.send([b"served"])
    assert inbox.recv(2000) == [b"served"]
    s.settimeout(2)
    assert s.recv(16) == b""
    s.close()


def test_too_many_descriptors_on_a_record_are_closed_with_its_connection(pair):
    inbox, out, _ = pair
    s = _proven(pair)
    out.send([b"warm"])
    assert inbox.recv(2000) == [b"warm"]
    pipes = [os.pipe() for _ in range(MAX_FDS + 2)]
    before = _open_fds()
    s.sendmsg([b"\x00x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                            array.array("i", [r for r, _ in pipes]))])
    out.send([b"after"])
    assert inbox.recv(2000) == [b"after"]
    with pytest.raises(u.Again):
        inbox.recv(200)
    assert _open_fds() == before - 1               # passed fds closed, and the socket's
    for r, w in pipes:
        os.close(r)
        os.close(w)
    s.close()
