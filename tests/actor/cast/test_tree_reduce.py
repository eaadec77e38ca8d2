"""Accumulators folded on the way back (monarch_cy._actor.cast.reduce): each forwarder
of a cast tree folds its subtree and the controller joins a few folds (fan-out 2
here, so 9 procs make a 3-level tree)."""

from __future__ import annotations

import operator
import os
import pickle
import re
import signal
import threading
import time

import numpy as np
import pytest

from monarch_cy.actor import Accumulator, ActorError, SupervisionError
from monarch_cy._actor.model import ports
from monarch_cy._actor.cast.reduce import ReduceRelay, reduce_spec
from monarch_cy._transport.protocol import REPLY, REPLY_PARTIAL, unpack
from _actors import Noter


@pytest.fixture
def tree(io_tree):
    """Folds on the way back happen on the I/O-thread path only (with the nogil
    forwarders every actor answers the controller, which folds)."""
    return io_tree


def _watch_controller(monkeypatch):
    """What reaches the controller's collector: ``[("one", rank) | ("fold", ranks)]``."""
    seen = []
    one, fold = ports.ReduceCollector.deliver, ports.ReduceCollector.deliver_partial

    def deliver(self, rank, ok, value):
        seen.append(("one", rank))
        return one(self, rank, ok, value)

    def deliver_partial(self, ranks, value):
        seen.append(("fold", sorted(ranks)))
        return fold(self, ranks, value)
    monkeypatch.setattr(ports.ReduceCollector, "deliver", deliver)
    monkeypatch.setattr(ports.ReduceCollector, "deliver_partial", deliver_partial)
    return seen


def test_forwarders_fold_and_the_controller_joins_one_value_per_head(tree, monkeypatch):
    m = tree.spawn("rec", Noter)
    m.note.call(0).get(30)
    seen = _watch_controller(monkeypatch)
    acc = Accumulator(m.note, 0, operator.add, merge=operator.add)
    assert acc.accumulate(3).get(15) == 27
    # heads 0 and 5 (chunks [0, 5) and [5, 9)): two folds, nothing one by one
    assert sorted(seen) == [("fold", [0, 1, 2, 3, 4]), ("fold", [5, 6, 7, 8])]
    assert acc.accumulate(4).get(15) == 36               # again, on the same relays
    seen.clear()
    assert Accumulator(m.note, [], lambda a, r: a + [r]).accumulate(5).get(15) == [5] * 9
    assert seen == []                 # no merge=: Monarch's fold, at the controller
    # a slice folds down the same tree; a small one (<= fan-out) goes direct
    assert Accumulator(m.slice(gpus=slice(2, 9)).note, 0, operator.add,
                       merge=operator.add).accumulate(1).get(15) == 7
    assert Accumulator(m.slice(gpus=slice(0, 2)).note, 10, operator.add,
                       merge=operator.add).accumulate(1).get(15) == 12
    assert m.log.call().get(15).values()[8] == [0, 3, 4, 5, 1]   # in order, per actor


def test_folds_of_arrays_and_replies_in_shared_memory(tree):
    m = tree.spawn("rec", Noter)
    small = np.arange(1000, dtype=np.int64)
    add = Accumulator(m.note, np.zeros(1000, np.int64), np.add, merge=np.add)
    assert (add.accumulate(small).get(15) == small * 9).all()
    big = np.ones(1 << 20, dtype=np.float64)        # 8 MiB: replies travel in shm
    total = Accumulator(m.note, np.zeros(1 << 20), np.add, merge=np.add)
    assert (total.accumulate(big).get(30) == 9.0).all()
    assert (total.accumulate(big * 2).get(30) == 18.0).all()   # segments were freed


def test_an_actor_error_or_a_failing_fold_fails_the_call(tree):
    m = tree.spawn("rec", Noter)
    acc = Accumulator(m.fail_at, 0, operator.add, merge=operator.add)
    with pytest.raises(ActorError, match="rank 6 was told to fail"):
        acc.accumulate(6, 1).get(15)
    assert acc.accumulate(99, 1).get(15) == 9            # the mesh is fine

    def picky(a, r):
        if r == 2 and os.getpid() != controller_pid:
            raise RuntimeError("no twos on a forwarder")
        return a + r
    controller_pid = os.getpid()
    with pytest.raises(ActorError, match="no twos on a forwarder"):
        Accumulator(m.note, 0, picky, merge=operator.add).accumulate(2).get(15)


def _fold_raising(exc):
    """A fold that raises ``exc`` on the reply of rank 6 (pickled by value: a closure)."""
    def fold(a, r):
        if r[0] == 6:
            raise exc
        return a + 1
    return fold


def _merge_raising(exc):
    def merge(a, b):
        raise exc
    return merge


def _frames_unquoted(text: str) -> str:
    """``text`` with each traceback frame reduced to its function's name."""
    return re.sub(r'  File "[^"]*", line \d+, in (\w+)\n(    .*\n)?', r"  in \1\n", text)


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt(), RuntimeError("no")],
                         ids=["SystemExit", "KeyboardInterrupt", "RuntimeError"])
def test_a_fold_that_raises_fails_that_call_alone_with_the_same_text_anywhere(tree, exc):
    """combine raising on rank 6's reply: at the controller (no merge=) and on a
    forwarder (merge=: rank 6 is folded below the controller) the call fails with the
    same ActorError naming mesh, endpoint and rank; no proc dies, and nothing is raised
    again by later calls (at the controller the replies still to come were re-raised by
    the next get()s; on a forwarder a SystemExit killed the proc)."""
    m = tree.spawn("rec", Noter)
    pids = m.pid.call().get(30).values()
    fold = _fold_raising(exc)
    errors = []
    for merge in (None, operator.add):
        with pytest.raises(ActorError) as e:
            Accumulator(m.whoami, 0, fold, merge=merge).accumulate().get(15)
        errors.append(e.value)
        for _ in range(3):                              # nothing stray, all answer
            assert m.note.call(1).get(15).values() == [1] * 9
    at_controller, on_forwarder = errors
    # the same words and frames; a function sent by value has no source to quote there
    assert _frames_unquoted(str(at_controller)) == _frames_unquoted(str(on_forwarder))
    for err in errors:
        assert (err.actor, err.endpoint, err.rank) == ("rec", "whoami", 6)
        assert type(err.exception) is type(exc)
        text = str(err)
        assert text.startswith("Actor call rec.whoami failed.\n"), text
        assert "Accumulator's combine raised on the reply of rank 6 (folding the replies " \
               "of rec.whoami)" in text, text
        assert ", in fold\n" in text and "cast/reduce.py" not in text \
            and "model/ports.py" not in text, text
    assert Accumulator(m.whoami, 0, lambda a, r: a + 1,
                       merge=operator.add).accumulate().get(15) == 9
    assert m.pid.call().get(30).values() == pids       # no proc died


@pytest.mark.parametrize("where", ["controller", "forwarder"])
def test_a_merge_that_raises_a_base_exception_fails_that_call_alone(tree, where):
    """merge runs at the controller (joining the heads' folds) and on forwarders
    (joining a sub-head's fold): a SystemExit there fails the call as an ActorError."""
    m = tree.spawn("rec", Noter)
    pids = m.pid.call().get(30).values()
    controller = os.getpid()

    def merge(a, b):
        if (os.getpid() == controller) == (where == "controller"):
            raise SystemExit("no merging here")
        return a + b
    with pytest.raises(ActorError) as e:
        Accumulator(m.note, 0, operator.add, merge=merge).accumulate(1).get(15)
    err = e.value
    assert (err.actor, err.endpoint) == ("rec", "note") and isinstance(err.rank, int)
    assert isinstance(err.exception, SystemExit)
    assert "Accumulator's merge raised on the fold of" in str(err)
    for _ in range(3):
        assert m.note.call(1).get(15).values() == [1] * 9
    assert m.pid.call().get(30).values() == pids


def test_bad_folds_are_refused_where_they_are_built():
    from types import SimpleNamespace
    from monarch_cy._actor.model.endpoint import Endpoint
    ep = Endpoint(SimpleNamespace(_name="rec"), "note", False)
    with pytest.raises(TypeError, match="merge must be callable or None, not 3"):
        Accumulator(ep, 0, operator.add, merge=3)
    with pytest.raises(TypeError, match="picklable by value"):
        Accumulator(ep, threading.Lock(), operator.add, merge=operator.add)


def test_a_dead_forwarder_fails_the_fold_instead_of_hanging(tree):
    m = tree.spawn("rec", Noter)
    pid0 = m.pid.call().get(30).values()[0]
    fut = Accumulator(m.nap, 0, operator.add, merge=operator.add).accumulate(1, 1.0)
    time.sleep(0.3)
    os.kill(pid0, signal.SIGKILL)                 # head 0 dies holding its fold
    with pytest.raises(SupervisionError):
        fut.get(20)
    tree.respawn().get(30)
    assert Accumulator(m.note, 0, operator.add,
                       merge=operator.add).accumulate(2).get(15) == 18


class _FakeNode:
    addr = "fwd"

    def __init__(self):
        self.sent, self.relays = [], {}

    def open_relay(self, relay):
        self.relays[7] = relay
        return 7

    def close_relay(self, pid):
        self.relays.pop(pid, None)

    def send(self, addr, frames):
        self.sent.append((addr, frames))

    def decode(self, data, extras):
        return pickle.loads(data)

    def encode(self, obj, receivers):
        return pickle.dumps(obj), ()


def test_a_relay_sends_one_fold_up_and_passes_shm_replies_untouched():
    node = _FakeNode()
    spec = reduce_spec(0, operator.add, operator.add)
    relay = ReduceRelay(node, "up", 99, b"key", 5, "note", spec)
    relay.take(0, True, pickle.dumps(1), ())
    relay.take_batch([(1, True, pickle.dumps(2)), (2, True, pickle.dumps(3))])
    shm_extras = [pickle.dumps(("owner", [(1, 2, 3, 4)]))]    # a shared-memory desc
    relay.take(3, True, b"value in shm", shm_extras)
    (addr, frames), = node.sent                                 # passed up at once
    assert addr == "up" and unpack(frames[0])[0] == (REPLY, 99, 3, True)
    assert 7 in node.relays
    relay.take_partial([4], pickle.dumps(10), ())
    assert 7 not in node.relays
    hdr, data = unpack(node.sent[1][1][0])
    assert hdr == (REPLY_PARTIAL, 99, [0, 1, 2, 4]) and pickle.loads(data) == 16
