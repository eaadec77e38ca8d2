"""The nogil forwarder (monarch_cy._transport.fanout, ._fanout): what actors receive,
passing on, order, auth, spilled messages, and forwarding while the GIL is held."""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import os
import socket
import threading
import time

import pytest

from monarch_cy._transport import fanout as fo
from monarch_cy._transport import unix_records
from monarch_cy._transport import unixsock as u
from monarch_cy._transport._fanout import hmac_sha256
from monarch_cy._transport.protocol import pack_call, unpack_call


def test_hmac_matches_hashlib():
    for n in (0, 1, 55, 56, 63, 64, 65, 119, 120, 1000):
        k, m = os.urandom(32), os.urandom(n)
        assert hmac_sha256(k, m) == hmac.digest(k, m, hashlib.sha256)


@pytest.fixture()
def tree(tmp_path):
    """A head forwarder, a child forwarder and three actor inboxes (a0 a1 under the
    head, a2 under the child); ``(send, boxes, head, child)``."""
    secret = os.urandom(32)
    head = fo.FanoutInbox(fo.addr_of(f"unix://{tmp_path}/h"), secret)
    head.job_secret = secret                    # for the tests below
    child = fo.FanoutInbox(fo.addr_of(f"unix://{tmp_path}/c"), secret)
    boxes = [u.Inbox(f"unix://{tmp_path}/a{i}", secret) for i in range(3)]
    out = u.Outlet(head.addr, secret)
    route_c = fo.pack_route([(2, boxes[2].addr)], [])
    route_h = fo.pack_route([(0, boxes[0].addr), (1, boxes[1].addr)],
                            [(f"unix://{tmp_path}/c", route_c)])

    def send(method, data, extras=(), port=12345, ext=None):
        tpl, off, _ = fo.call_template(method, "unix://reply", port, "key", ext)
        f0 = fo.pack_message(tpl, off, route_h, data)
        assert out.send([f0, *extras]) is True

    yield send, boxes, head, child
    out.close()
    for b in boxes:
        b.close()
    head.close()
    child.close()
    for f in os.listdir(tmp_path):            # nothing left behind
        assert not f.startswith(("h", "c")), f


def test_each_actor_gets_the_header_pack_call_would_make(tree):
    send, boxes, head, child = tree
    send("ping", b"payload", ext=b"ext")
    for rank, box in enumerate(boxes):
        got = box.recv(3000)
        assert len(got) == 1
        hdr, data = unpack_call(got[0])
        assert hdr == unpack_call(pack_call("ping", "unix://reply", 12345, rank, "key",
                                            b"ext"))[0]
        assert hdr == ("ping", "unix://reply", 12345, rank, "key", b"ext")
        assert bytes(data) == b"payload"
    assert head.stats()["forwarded"] == 1 and head.stats()["delivered"] == 2
    assert child.stats()["delivered"] == 1


def test_extra_frames_and_spilled_messages_pass_whole(tree):
    send, boxes, _, child = tree
    big = os.urandom(300_000)
    send("m", b"d" * 70_000, extras=[b"desc", big])
    for rank, box in enumerate(boxes):
        got = box.recv(3000)
        hdr, data = unpack_call(got[0])
        assert hdr == ("m", "unix://reply", 12345, rank, "key", None)
        assert bytes(data) == b"d" * 70_000
        assert [bytes(f) for f in got[1:]] == [b"desc", big]
    assert child.stats()["spilled"] == 1


def test_order_per_destination_is_kept(tree):
    send, boxes, _, _ = tree
    for i in range(500):
        send("seq", str(i).encode())
    for box in boxes:
        seen = [bytes(unpack_call(box.recv(3000)[0])[1]) for _ in range(500)]
        assert seen == [str(i).encode() for i in range(500)]


def test_unproven_and_replayed_connections_are_refused(tree, tmp_path):
    send, boxes, head, _ = tree
    path = u.path_of(head.addr)
    target, inc = unix_records.resolve(path)
    tpl, off, _ = fo.call_template("x", "r", 1, "k", None)
    msg = bytes((0,)) + fo.pack_message(tpl, off, fo.pack_route([(0, boxes[0].addr)], []))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(target)
    s.send(msg)                                   # no proof first
    rec = unix_records.proof_record(b"\0" * 32, path, inc)
    s2 = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s2.connect(target)
    s2.send(rec)                                  # another job's proof
    _send_refused(s2, msg)
    good = unix_records.proof_record(head_secret(head), path, inc)
    for _ in range(2):                            # the second is a replay
        s3 = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s3.connect(target)
        s3.send(good)
        _send_refused(s3, msg)
        s3.close()
    deadline = time.monotonic() + 3
    while head.stats()["refused"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert head.stats()["refused"] == 3
    assert unpack_call(boxes[0].recv(3000)[0])[0] == ("x", "r", 1, 0, "k", None)  # once
    with pytest.raises(u.Again):
        boxes[0].recv(200)
    s.close()
    s2.close()


def _send_refused(s, rec) -> None:
    """Send ``rec`` on a connection the forwarder may have closed already."""
    try:
        s.send(rec)
    except (BrokenPipeError, ConnectionResetError):
        pass


def head_secret(head):
    return head.job_secret


def test_malformed_messages_are_dropped_and_counted(tree):
    send, boxes, head, _ = tree
    out = u.Outlet(head.addr, head.job_secret)
    out.send([b"\xfa\x01short"])
    out.send([b"not a fan-out message at all"])
    tpl, off, _ = fo.call_template("x", "r", 1, "k", None)
    bad_route = fo.pack_message(tpl, off, b"\x05\0\0\0")     # 5 targets, none there
    out.send([bad_route])
    deadline = time.monotonic() + 3
    while head.stats()["malformed"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert head.stats()["malformed"] == 3
    send("after", b"")                                       # still serving
    assert unpack_call(boxes[0].recv(3000)[0])[0][0] == "after"
    out.close()


def test_forwards_while_this_thread_holds_the_gil_in_c(tree):
    """The point of it: a C call that keeps the GIL for 1 s does not hold the
    forwarding (the actors' inboxes are read only after it, but the records are
    there, sent while the GIL was held)."""
    send, boxes, head, _ = tree
    send("warm", b"")
    for b in boxes:
        b.recv(3000)
    before = head.stats()["delivered"]
    done = []

    def hold():
        send("busy", b"")
        hold_gil(1.0)
        done.append(head.stats()["delivered"])

    t = threading.Thread(target=hold)
    t.start()
    t.join()
    assert done[0] == before + 2                 # delivered while the GIL was held


def hold_gil(seconds: float) -> None:
    """Keep the GIL for ``seconds`` in C: ``usleep`` called through
    ``ctypes.PyDLL`` (which does not release the GIL around the call)."""
    libc = ctypes.PyDLL(None)
    libc.usleep(int(seconds * 1e6))


def test_a_message_of_thousands_of_frames_passes_whole(tree):
    send, boxes, _, _ = tree
    extras = [bytes([i % 251]) * (i % 7) for i in range(1500)]
    send("many", b"x", extras=extras)
    for rank, box in enumerate(boxes):
        got = box.recv(3000)
        assert unpack_call(got[0])[0][3] == rank
        assert [bytes(f) for f in got[1:]] == extras
