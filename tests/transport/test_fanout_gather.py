"""The nogil forwarders gather replies (monarch_cy._transport._fanout_gather.pxi): what
the actors are told to answer, what reaches the sender (the messages a Python relay
would send, pickled in C), errors and large replies alone, per-turn batches, passed
notices kept in order, and bad input counted."""

from __future__ import annotations

import os
import pickle
import struct
import time
from types import SimpleNamespace

import pytest

from monarch_cy._transport import fanout as fo
from monarch_cy._transport import unixsock as u
from monarch_cy._transport._fanout import KINDS
from monarch_cy._transport.protocol import (REPLY, REPLY_BATCH, UNDELIVERABLE, pack,
                                            unpack, unpack_call)

PORT = 0x1234_5678_9A01          # a port id as the node makes them (above 2**31)


def test_the_c_kinds_are_the_protocols():
    assert KINDS == (REPLY, REPLY_BATCH)


@pytest.fixture()
def t(tmp_path):
    """A head forwarder (delivers to a0 a1), a child forwarder below it (a2), three
    actor inboxes and the sender's inbox ``ctl``."""
    secret = os.urandom(32)
    ns = SimpleNamespace(secret=secret, outlets={})
    ns.head = fo.FanoutInbox(fo.addr_of(f"unix://{tmp_path}/h"), secret)
    ns.child = fo.FanoutInbox(fo.addr_of(f"unix://{tmp_path}/c"), secret)
    ns.boxes = [u.Inbox(f"unix://{tmp_path}/a{i}", secret) for i in range(3)]
    ns.ctl = u.Inbox(f"unix://{tmp_path}/ctl", secret)
    route_c = fo.pack_route([(2, ns.boxes[2].addr)], [])
    ns.route = fo.pack_route([(0, ns.boxes[0].addr), (1, ns.boxes[1].addr)],
                             [(f"unix://{tmp_path}/c", route_c)])

    def outlet(addr):
        if addr not in ns.outlets:
            ns.outlets[addr] = u.Outlet(addr, secret)
        return ns.outlets[addr]

    def send(mode, data=b"args", port=PORT, method="ep"):
        tpl, off, span = fo.call_template(method, ns.ctl.addr, port, "key", None)
        assert span is not None
        assert outlet(ns.head.addr).send([fo.pack_message(
            tpl, off, ns.route, data, mode, port, ns.ctl.addr, span)]) is True

    def take(rank):
        """What actor ``rank`` received: ``(header, payload)``."""
        hdr, data = unpack_call(ns.boxes[rank].recv(3000)[0])
        return hdr, bytes(data)

    def answer(rank, ok=True, value=b"v", extras=(), port=PORT):
        """Take actor ``rank``'s call and answer it as Node.reply would; the reply
        address it answered."""
        hdr, data = take(rank)
        assert hdr[3] == rank and data == b"args"
        assert outlet(hdr[1]).send([fo.pack_reply(port, rank, ok) + value, *extras])
        return hdr[1]

    def up():
        """The next message the sender receives: ``(header, payload, extras)``."""
        got = ns.ctl.recv(3000)
        hdr, data = unpack(got[0])
        return hdr, bytes(data), [bytes(f) for f in got[1:]]

    ns.outlet, ns.send, ns.take, ns.answer, ns.up = outlet, send, take, answer, up
    yield ns
    for o in ns.outlets.values():
        o.close()
    for b in [*ns.boxes, ns.ctl]:
        b.close()
    ns.head.close()
    ns.child.close()


def _settled(fwd, key, want):
    deadline = time.monotonic() + 3
    while fwd.stats()[key] != want and time.monotonic() < deadline:
        time.sleep(0.005)
    return fwd.stats()[key]


def test_actors_answer_their_forwarder_and_the_sender_gets_one_batch(t):
    t.send(fo.WHOLE)
    assert t.answer(0) == t.head.addr                  # the head gathers a0, a1 ...
    assert t.answer(2, value=b"two") == t.child.addr   # ... the child a2
    assert t.answer(1, value=b"x" * 300) == t.head.addr
    hdr, data, extras = t.up()
    assert hdr == (REPLY_BATCH, PORT) and extras == []
    assert sorted(pickle.loads(data)) == [(0, True, b"v"), (1, True, b"x" * 300),
                                          (2, True, b"two")]
    assert _settled(t.head, "gathers", 0) == 0 and _settled(t.child, "gathers", 0) == 0
    assert t.head.stats()["batched"] == 1 and t.child.stats()["batched"] == 1
    assert t.head.stats()["gathered"] == 3             # 2 replies + a batch of 1


def test_without_gathering_the_actors_answer_the_sender(t):
    t.send(fo.NONE)
    for rank in range(3):
        hdr, _ = t.take(rank)
        assert hdr == ("ep", t.ctl.addr, PORT, rank, "key", None)
    assert t.head.stats()["gathers"] == 0


def test_the_header_differs_from_the_callers_only_in_the_reply_address(t):
    for method in ("m", "a_much_longer_endpoint_name" * 3):
        t.send(fo.WHOLE, method=method)
        for rank in range(3):
            hdr, _ = t.take(rank)
            owner = t.head if rank < 2 else t.child
            assert hdr == (method, owner.addr, PORT, rank, "key", None)


def test_an_error_goes_up_at_once_and_alone_and_fails_the_rest(t):
    t.send(fo.WHOLE)
    t.answer(0)
    t.answer(1, ok=False, value=b"boom")
    hdr, data, _ = t.up()                   # before a2 answered: at once
    assert hdr == (REPLY, PORT, 1, False) and data == b"boom"
    t.answer(2)
    assert _settled(t.head, "gathers", 0) == 0          # the rest was dropped, and done
    with pytest.raises(u.Again):
        t.ctl.recv(200)


def test_a_reply_with_large_buffers_goes_up_alone_untouched(t):
    big = os.urandom(200_000)
    t.send(fo.WHOLE)
    t.answer(2, value=b"desc", extras=[b"meta", big])   # through the child, then up
    hdr, data, extras = t.up()
    assert hdr == (REPLY, PORT, 2, True) and data == b"desc" and extras == [b"meta", big]
    t.answer(0)
    t.answer(1)
    hdr, data, _ = t.up()
    assert hdr == (REPLY_BATCH, PORT)
    assert sorted(pickle.loads(data)) == [(0, True, b"v"), (1, True, b"v")]


def test_large_values_gathered_travel_spilled(t):
    vals = {r: os.urandom(40_000 + r) for r in range(3)}
    t.send(fo.WHOLE)
    for r in range(3):
        t.answer(r, value=vals[r])
    hdr, data, _ = t.up()
    assert hdr == (REPLY_BATCH, PORT)
    assert sorted(pickle.loads(data)) == [(r, True, vals[r]) for r in range(3)]


def test_per_turn_batches_send_what_came(t):
    t.send(fo.PER_TURN)
    t.answer(0)
    hdr, data, _ = t.up()                  # not held for the rest
    assert hdr == (REPLY_BATCH, PORT) and pickle.loads(data) == [(0, True, b"v")]
    t.answer(1, ok=False, value=b"e")      # an error is a value like any other here
    t.answer(2)
    got = []
    while len(got) < 2:
        hdr, data, _ = t.up()
        got += pickle.loads(data)
    assert sorted(got) == [(1, False, b"e"), (2, True, b"v")]
    assert _settled(t.head, "gathers", 0) == 0


def test_a_notice_passed_up_arrives_before_the_error_it_announces(t):
    t.send(fo.WHOLE)
    hdr, _ = t.take(2)
    notice = pack((UNDELIVERABLE, PORT, "a.ep()", "a@x", "failed", 4))
    out = t.outlet(hdr[1])
    out.send([fo.pack_pass(PORT, notice)])
    out.send([fo.pack_reply(PORT, 2, False) + b"err"])
    first, _, _ = t.up()
    assert first == (UNDELIVERABLE, PORT, "a.ep()", "a@x", "failed", 4)
    second, data, _ = t.up()
    assert second == (REPLY, PORT, 2, False) and data == b"err"


def test_calls_in_flight_are_gathered_apart(t):
    ports = [PORT + i for i in range(50)]
    for p in ports:
        t.send(fo.WHOLE, port=p)
    for p in ports:
        for r in range(3):
            t.answer(r, value=str(p).encode(), port=p)
    seen = {}
    for _ in ports:
        hdr, data, _ = t.up()
        seen[hdr[1]] = sorted(pickle.loads(data))
    assert seen == {p: [(r, True, str(p).encode()) for r in range(3)] for p in ports}
    assert _settled(t.head, "gathers", 0) == 0


def test_stray_and_malformed_replies_are_counted_and_dropped(t):
    out = t.outlet(t.head.addr)
    out.send([fo.pack_reply(999, 0, True) + b"v"])                 # no such call
    out.send([b"\xfb\x01short"])                                     # cut short
    out.send([struct.pack("<BBIQ", 0xFC, 0, 5, PORT) + b"\0" * 9])  # 5 entries, 1 there
    assert _settled(t.head, "stray", 1) == 1
    assert _settled(t.head, "malformed", 2) == 2
    t.send(fo.WHOLE)                                                 # still serving
    for r in range(3):
        t.answer(r)
    assert t.up()[0] == (REPLY_BATCH, PORT)


def test_a_key_that_is_the_reply_address_stays_the_callers(t):
    """The controller's reply key is its address, often the same object: pickle
    would write it as a reference to the address the forwarder replaces."""
    addr = t.ctl.addr
    tpl, off, span = fo.call_template("ep", addr, PORT, addr, None)
    assert span is not None
    t.outlet(t.head.addr).send([fo.pack_message(tpl, off, t.route, b"args", fo.WHOLE,
                                                PORT, addr, span)])
    for rank in range(3):
        hdr, _ = t.take(rank)
        assert hdr[1] in (t.head.addr, t.child.addr) and hdr[4] == addr


def test_a_reply_address_not_found_means_no_gathering():
    tpl, off, span = fo.call_template("ep", "tcp://h:1", 1, "k", None)
    assert span is not None                         # found: but not unix://
    assert fo.pack_message(tpl, off, b"", b"", fo.WHOLE, 1, "tcp://h:1", span) == \
        fo.pack_message(tpl, off, b"", b"")
    assert fo.call_template("ep", "x" * 300, 1, "k", None)[2] is None
    with pytest.raises(ValueError, match="mode=7"):
        fo.pack_message(tpl, off, b"", b"", 7)
