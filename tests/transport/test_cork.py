"""Corked bursts (monarch_cy._transport.cork): replies to pipelined calls leave together,
without reordering, deadlock or holding a reply behind a slow call."""

from __future__ import annotations

import time

from monarch_cy._transport import cork, unix_records, unixsock


def test_pipelined_calls_keep_order_and_values(echo):
    one = echo.slice(gpus=1)
    futs = [one.incr.call_one(1) for _ in range(3000)]
    got = [f.get(30) for f in futs]
    assert got == sorted(got) and got[-1] - got[0] == 2999


def test_burst_that_calls_out_and_waits_does_not_deadlock(echo):
    """Each call waits for a call of its own: the held replies and the outgoing
    call must leave before the actor blocks (Node.wait flushes the cork)."""
    a, b = echo.slice(gpus=2), echo.slice(gpus=3)
    futs = [a.call_other.call_one(b, i) for i in range(200)]
    assert [f.get(30) for f in futs] == [[i] for i in range(200)]


def test_reply_is_not_held_behind_a_slow_call(echo):
    one = echo.slice(gpus=0)
    one.ping.call_one(0).get(10)
    t0 = time.monotonic()
    fast = [one.ping.call_one(i) for i in range(5)]
    slow = one.sleep.call_one(1.5)
    for i, f in enumerate(fast):
        assert f.get(10) == i
    waited = time.monotonic() - t0
    assert slow.get(10) == 1.5
    assert waited < 0.75, f"fast replies took {waited:.2f} s behind a 1.5 s call"


def test_batch_records_round_trip(tmp_path):
    import os
    secret = os.urandom(32)
    addr = f"unix://{tmp_path}/b"
    box, out = unixsock.Inbox(addr, secret), unixsock.Outlet(addr, secret)
    try:
        msgs = [[b"m%d" % i] for i in range(5000)]
        msgs.insert(7, [b"h", b"two frames"])                # breaks a run
        msgs.insert(9, [b"x" * (unixsock.MAX_RECORD + 5)])     # spilled, alone
        recs = unix_records.records(msgs)
        assert len(recs) < 100                               # batched, not 5002
        assert out.send_many(msgs) is True or out.flush() is not None
        got = []
        while len(got) < len(msgs):
            try:
                got.append([bytes(f) for f in box.recv(2000)])
            except unixsock.Again:
                out.flush()
        assert got == [[bytes(f) for f in m] for m in msgs]
    finally:
        out.close()
        box.close()


def test_batch_of_one_is_refused_by_the_receiver(tmp_path):
    """A malformed batch (fewer than two messages) drops the connection."""
    import os
    import socket
    secret = os.urandom(32)
    addr = f"unix://{tmp_path}/b1"
    box = unixsock.Inbox(addr, secret)
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(box.path)
        s.send(unix_records.proof_record(secret, box.path, box.incarnation))
        s.send(bytes((4, 1, 0)) + (3).to_bytes(4, "little") + b"abc")
        try:
            box.recv(300)
            raise AssertionError("a batch of one was delivered")
        except unixsock.Again:
            pass
        s.settimeout(2)
        try:
            assert s.recv(8) == b""
        except ConnectionResetError:
            pass
        s.close()
    finally:
        box.close()


def test_limits_are_sane():
    assert 1 < cork.MAX_BURST <= 4096 and 0 < cork.MAX_DELAY <= 0.01
