"""The ``unix://`` proof (monarch_cy._transport.unixsock): no captured proof is accepted
twice, not by the same inbox and not by a respawned one at the same address; a peer
that proves nothing is closed after MONARCH_CY_AUTH_TIMEOUT; refusals are logged at a
bounded rate.  Every socket lives in a temporary folder of this process."""

from __future__ import annotations

import logging
import os
import pickle
import select
import socket
import threading
import time

import pytest

from monarch_cy._log import RateLimited
from monarch_cy._transport import unix_inbox, unix_records
from monarch_cy._transport import unixsock as u
from monarch_cy._transport.auth import JobKeys
from monarch_cy._transport.node import Node
from monarch_cy._transport.protocol import pack

KIND = 99                                   # a message kind only these tests handle


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _evil_record(path) -> bytes:
    """A one-frame record whose header unpickles to ``open(path, "w")``: the node
    unpickles the header of every message it accepts."""
    evil = pickle.dumps(_Evil(path))
    return b"\x00" + len(evil).to_bytes(2, "little") + evil


def _dropped(s, within=5.0) -> bool:
    """True once the peer closes or resets the connection (within ``within`` s)."""
    end = time.monotonic() + within
    s.settimeout(0.05)
    try:
        while time.monotonic() < end:
            try:
                if not s.recv(16):
                    return True
            except socket.timeout:
                continue
    except (ConnectionResetError, BrokenPipeError):
        return True
    return False


def _replay(path, records):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)                       # through the link: the inbox there now
    for r in records:
        try:
            s.send(r)
        except (BrokenPipeError, ConnectionResetError):
            break                         # dropped already
    return s


def _node(addr, secret, rundir):
    node = Node(addr, JobKeys(secret), rundir=rundir, is_controller=False,
                direct_addr=addr + "d")
    got = []
    node.handlers[KIND] = lambda n, hdr, data, extras: got.append(pickle.loads(data))
    node.start_io_thread()
    return node, got


def _send(out, frames, timeout=5.0):
    if out.send(frames):
        return
    end = time.monotonic() + timeout
    while not out.flush():
        assert time.monotonic() < end, "the outlet could not deliver"
        time.sleep(0.001)


def _wait(pred, timeout=5.0) -> bool:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_captured_proof_is_refused_by_the_same_and_by_a_respawned_inbox(
        tmp_path, monkeypatch):
    """Issue 15, 3: a proof captured off a real sender's connection (here at the socket
    level, in-process: what strace would show) and replayed -- to the same inbox, and
    to a fresh inbox bound at the same address (a respawn) -- opens nothing: the
    connection is dropped and the code-running pickle after it is never unpickled."""
    secret = os.urandom(32)
    addr = f"unix://{tmp_path}/p0"
    path = u.path_of(addr)
    pwned = tmp_path / "pwned"
    captured = []
    real_send = socket.socket.send

    def spy(sock, data, *args):
        if sock.family == socket.AF_UNIX and len(data) == 49 and data[0] == 3:
            captured.append(bytes(data))
        return real_send(sock, data, *args)

    node, got = _node(addr, secret, str(tmp_path))
    out = u.Outlet(addr, secret)
    try:
        monkeypatch.setattr(socket.socket, "send", spy)
        _send(out, [pack((KIND,), pickle.dumps("first"))])
        monkeypatch.undo()
        assert _wait(lambda: got == ["first"])               # the real sender got in
        assert len(captured) == 1
        proof = captured[0]

        s = _replay(path, [proof, _evil_record(str(pwned))])  # 1. the same inbox
        assert _dropped(s), "the same inbox accepted a replayed proof"
        s.close()

        node.close()                                        # 2. the proc is respawned:
        out.close()
        node, got = _node(addr, secret, str(tmp_path))       # same address, new inbox
        s = _replay(path, [proof, _evil_record(str(pwned))])
        assert _dropped(s), "a respawned inbox accepted a proof captured before"
        s.close()

        out = u.Outlet(addr, secret)                        # positive control: a real
        _send(out, [pack((KIND,), pickle.dumps("second"))])  # sender reaches the new one
        assert _wait(lambda: got == ["second"])
        time.sleep(0.1)
        assert not pwned.exists(), "a replayed connection's pickle was unpickled"
    finally:
        monkeypatch.undo()
        out.close()
        node.close()


def test_respawn_swaps_the_link_and_leaves_no_old_socket(tmp_path):
    secret = os.urandom(32)
    addr = f"unix://{tmp_path}/p1"
    old = u.Inbox(addr, secret)
    old_target = old.target
    new = u.Inbox(addr, secret)               # the old proc was SIGKILLed: no close()
    try:
        assert new.incarnation != old.incarnation
        assert unix_records.resolve(new.path) == (new.target, new.incarnation)
        assert not os.path.exists(old_target)
        old.close()                           # late close of the old one: keeps the link
        assert unix_records.resolve(new.path)[1] == new.incarnation
        out = u.Outlet(addr, secret)
        _send(out, [b"to the new one"])
        assert new.recv(2000) == [b"to the new one"]
        out.close()
    finally:
        new.close()
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize("reader", ["blocking", "polled"])
def test_a_peer_proving_nothing_is_closed_after_the_auth_timeout(tmp_path, monkeypatch,
                                                                   caplog, reader):
    """An idle connection (nothing sent) is closed within MONARCH_CY_AUTH_TIMEOUT, both
    when the inbox's reader blocks in recv() and when a pump polls its fd; half a proof
    is refused at once; real peers are served all along."""
    monkeypatch.setenv("MONARCH_CY_AUTH_TIMEOUT", "0.3")
    monkeypatch.setattr(unix_inbox, "REFUSALS", RateLimited("transport", "refusals"))
    secret = os.urandom(32)
    addr = f"unix://{tmp_path}/box"
    box = u.Inbox(addr, secret)
    out = u.Outlet(addr, secret)
    caplog.set_level(logging.WARNING, "monarch_cy.transport")
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    half = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    t0 = time.monotonic()
    idle.connect(box.path)
    half.connect(box.path)
    half.send(unix_records.proof_record(secret, box.path, box.incarnation)[:25])
    closed = {}
    stop = threading.Event()

    def watch(name, s):
        if _dropped(s, within=3.0):
            closed[name] = time.monotonic() - t0
        s.close()
    watchers = [threading.Thread(target=watch, args=a) for a in (("idle", idle),
                                                                  ("half", half))]
    for w in watchers:
        w.start()
    poll = select.poll()
    poll.register(box.fileno(), select.POLLIN)
    served = 0
    try:
        end = time.monotonic() + 1.5
        while time.monotonic() < end and not stop.is_set():
            _send(out, [b"m%d" % served])
            while True:                          # read until this message comes
                try:
                    if reader == "blocking":
                        got = box.recv(20)
                    else:
                        poll.poll(20)
                        got = box.recv(0)
                except u.Again:
                    continue
                assert got == [b"m%d" % served]
                served += 1
                break
            time.sleep(0.01)
            if len(closed) == 2:
                stop.set()
    finally:
        for w in watchers:
            w.join(5)
        out.close()
        box.close()
    assert served > 10
    assert closed.get("half", 99) < 0.25            # refused as soon as it was read
    assert 0.25 <= closed.get("idle", 99) < 1.3, closed
    text = caplog.text
    assert "no proof within 0.3 s" in text and "its first record is not a proof" in text


def test_idle_peers_are_closed_while_no_thread_reads_the_inbox(tmp_path, monkeypatch):
    """Nobody calls recv() (a caller's reply inbox between calls, an idle actor's): a
    peer that proves nothing, connected before and after the inbox was last read, is
    still closed after MONARCH_CY_AUTH_TIMEOUT, and a peer that proved itself keeps
    its messages for the reader."""
    monkeypatch.setenv("MONARCH_CY_AUTH_TIMEOUT", "0.2")
    secret = os.urandom(32)
    box = u.Inbox(f"unix://{tmp_path}/quiet", secret)
    out = u.Outlet(box.addr, secret)
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    late = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        idle.connect(box.path)
        _send(out, [b"first"])
        assert box.recv(2000) == [b"first"]      # the last read: idle is accepted
        t0 = time.monotonic()
        late.connect(box.path)                   # while no thread reads
        _send(out, [b"kept"])
        assert _dropped(idle, within=2.0) and _dropped(late, within=2.0)
        assert 0.15 < time.monotonic() - t0 < 2.0
        assert box.recv(2000) == [b"kept"]       # the job's peer was not touched
    finally:
        idle.close()
        late.close()
        out.close()
        box.close()


def test_a_flood_of_refused_connections_logs_a_handful_of_lines(tmp_path, monkeypatch,
                                                                 caplog):
    """1000 refused connections: the first 5 of an interval are logged, then one
    summary line with the count of the others (written when the interval ends, by the
    inbox's alarm if nothing else comes)."""
    import re
    limiter = RateLimited("transport", "refused unix:// connections", burst=5,
                          interval=1.0)
    monkeypatch.setattr(unix_inbox, "REFUSALS", limiter)
    caplog.set_level(logging.WARNING, "monarch_cy.transport")
    secret = os.urandom(32)
    box = u.Inbox(f"unix://{tmp_path}/flood", secret)
    bad = [b"\x00" + pickle.dumps("no proof"),
           unix_records.proof_record(os.urandom(32), box.path, box.incarnation)]
    out = u.Outlet(box.addr, secret)

    def lines():       # without the client's "[actor=<root>] " (Monarch's prefix)
        return [r.getMessage().removeprefix(getattr(r, "actor_prefix", ""))
                for r in caplog.records if r.name == "monarch_cy.transport"]
    try:
        for batch in range(10):
            socks = []
            for i in range(100):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(box.path)
                s.send(bad[i % 2])
                socks.append(s)
            end = time.monotonic() + 10
            while len([m for m in lines() if "refused a connection" in m]) + \
                    limiter.suppressed + sum(int(m.split()[2]) for m in lines()
                                             if m.startswith("...")) < 100 * (batch + 1):
                assert time.monotonic() < end
                try:
                    box.recv(0)
                except u.Again:
                    pass
            for s in socks:
                s.close()
        _send(out, [b"served"])                  # the inbox still serves its job
        assert box.recv(2000) == [b"served"]
        end = time.monotonic() + 3
        while limiter.suppressed and time.monotonic() < end:
            with pytest.raises(u.Again):
                box.recv(100)                    # the alarm writes the summary
        got = lines()
        assert 6 <= len(got) <= 12, got
        each = [m for m in got if m.startswith("refused a connection to")]
        summaries = [m for m in got if m.startswith("... and ")]
        assert len(each) + len(summaries) == len(got) and summaries
        counts = [int(re.match(r"\.\.\. and (\d+) more refused unix:// connections in "
                               r"the last", m)[1]) for m in summaries]
        assert len(each) + sum(counts) == 1000
    finally:
        out.close()
        box.close()


def test_an_address_too_long_for_its_socket_is_named(tmp_path):
    deep = tmp_path / ("d" * (100 - len(str(tmp_path))))
    deep.mkdir()
    addr = f"unix://{deep}/box"                  # fits sun_path; its socket does not
    with pytest.raises(ValueError, match="too long for a unix:// inbox"):
        u.Inbox(addr, os.urandom(32))
    assert os.listdir(deep) == []


def test_malformed_messages_of_the_job_log_one_traceback_then_a_count(tmp_path,
                                                                      monkeypatch, caplog):
    """200 authenticated messages a handler cannot handle (a bug or a version skew):
    one full traceback, the rest counted in one summary line when the interval ends;
    the node goes on serving."""
    from monarch_cy._transport import node as node_mod
    limiter = RateLimited("transport", "messages that could not be handled", burst=1,
                          interval=0.5)
    monkeypatch.setattr(node_mod, "_UNHANDLED", limiter, raising=False)
    caplog.set_level(logging.WARNING, "monarch_cy.transport")
    secret = os.urandom(32)
    addr = f"unix://{tmp_path}/m0"
    node, got = _node(addr, secret, str(tmp_path))
    out = u.Outlet(addr, secret)
    try:
        for _ in range(200):
            _send(out, [pack((KIND,), b"not a pickle")])
        _send(out, [pack((KIND,), pickle.dumps("after"))])
        assert _wait(lambda: got == ["after"])
        time.sleep(0.6)
        _send(out, [pack((KIND,), b"not a pickle")])      # the next interval's first
        assert _wait(lambda: sum(r.getMessage().startswith("... and ")
                                 for r in caplog.records) == 1)
    finally:
        out.close()
        node.close()
    records = [r for r in caplog.records if r.name == "monarch_cy.transport"]
    traced = [r for r in records if r.exc_info]
    assert len(traced) == 2 and "UnpicklingError" in caplog.text   # one per interval
    plain = [r.getMessage() for r in records if not r.exc_info]
    assert len(records) == 3 and len(plain) == 1, [r.getMessage() for r in records]
    assert plain[0].startswith("... and 199 more messages that could not be handled "
                               "in the last"), plain
