"""Casts down a tree (monarch_cy._actor.cast.tree): the route, the path rules, and
real meshes whose calls travel it (fan-out 2 here, so 9 procs make a 3-level tree)."""

from __future__ import annotations

import math
import os
import pickle
import signal
import threading
import time

import numpy as np
import pytest

from monarch_cy.actor import Accumulator, Channel, SupervisionError, send, this_host
from monarch_cy._actor.cast import router as cast_router
from monarch_cy._actor.cast import tree as cast_tree
from monarch_cy._actor.cast.router import DIRECT, TREE, Router
from monarch_cy._actor.cast.tree import Plan
from monarch_cy._transport.protocol import HB_TREE, HEARTBEAT
from _actors import Noter
from _sends import count_sends


# -- the route ---------------------------------------------------------------------
def _walk(plan: Plan):
    """Follow a plan as the forwarders would: ``{local rank: (addr, hops)}``, and the
    largest number of sends any one hop makes."""
    reached, widest = {}, len(plan.heads)

    def visit(route, hops, count):
        nonlocal widest
        here, children = pickle.loads(route)
        widest = max(widest, len(children) + len(here))
        for local, addr in here:
            assert local not in reached, f"rank {local} reached twice"
            reached[local] = (addr, hops)
        assert sum(c for _, c, _ in children) + len(here) == count
        for _, c, sub in children:
            visit(sub, hops + 1, c)
    for _, c, route in plan.heads:
        visit(route, 1, c)
    for local, addr in plan.direct:
        assert local not in reached, f"rank {local} reached twice"
        reached[local] = (addr, 0)
    widest = max(widest, len(plan.heads) + len(plan.direct))
    return reached, widest


@pytest.mark.parametrize("n,k", [(1, 2), (2, 2), (9, 2), (17, 16), (100, 3), (1024, 16),
                                 (1000, 7)])
def test_every_rank_is_reached_once_within_the_fanout_and_the_depth(n, k):
    addrs = tuple(f"a{i}" for i in range(n))
    procs = tuple(f"p{i}" for i in range(n))
    plan = Plan(addrs, procs, range(n), k)
    reached, widest = _walk(plan)
    assert sorted(reached) == list(range(n))
    assert all(reached[r][0] == addrs[r] for r in reached)
    assert widest <= k + 1              # a hop: at most k below it and its own actor
    depth = max(h for _, h in reached.values())
    assert depth <= math.ceil(math.log(n, k)) + 1
    assert len(plan.heads) + len(plan.direct) <= k


def test_a_slice_keeps_its_call_ranks_and_passes_through_the_same_heads():
    n, k = 64, 4
    addrs = tuple(f"a{i}" for i in range(n))
    procs = tuple(f"p{i}" for i in range(n))
    granks = [50, 3, 17, 40, 41, 63]             # call rank i is global rank granks[i]
    plan = Plan(addrs, procs, granks, k)
    reached, _ = _walk(plan)
    assert {local: addr for local, (addr, _) in reached.items()} == \
        {i: addrs[g] for i, g in enumerate(granks)}
    full = {p for p, _, _ in Plan(addrs, procs, range(n), k).heads}
    assert {p for p, _, _ in plan.heads} <= full      # the fixed tree, pruned
    # every target sits under each forwarder on its way (to fail it if one dies)
    for p, under in plan.below.items():
        assert p in plan.procs and set(under) <= {procs[g] for g in granks}
    assert "p50" in plan.below["p48"]              # 48 heads the chunk [48, 64)


# -- the path rules ----------------------------------------------------------------
def test_a_direct_call_waits_for_the_tree_to_be_answered_and_the_reverse():
    r = Router(("a",), ("p",), 2)
    path, c1 = r.start(TREE, True)              # a call down the tree, in flight
    assert path == TREE
    assert r.start(DIRECT, True)[0] == TREE     # so a call_one follows it there
    r.end(TREE, c1, True, True)
    r.end(TREE, c1 + 1, True, False)
    path, c3 = r.start(DIRECT, True)            # everything answered: direct again
    assert path == DIRECT
    assert r.start(TREE, True)[0] == DIRECT     # and a cast now follows the direct one
    r.end(DIRECT, c3, True, False)
    r.end(DIRECT, c3 + 1, True, True)
    assert r.start(TREE, False)[0] == TREE      # a broadcast down the tree: held open
    assert r.start(DIRECT, True)[0] == TREE     # ... until a whole-mesh call there
    r.end(TREE, r.ids, True, False)             # (a slice does not prove it)
    assert r.start(DIRECT, True)[0] == TREE
    r.end(TREE, r.ids, True, True)
    path, _ = r.start(TREE, True)
    r.end(TREE, r.ids, True, True)              # the whole mesh answered: released
    assert r.start(DIRECT, True)[0] == DIRECT


def test_an_unconfirmed_call_holds_its_path():
    r = Router(("a",), ("p",), 2)
    _, c = r.start(TREE, True)
    r.end(TREE, c, False, True)                 # failed part-way or timed out
    assert r.tree_in_use() and r.start(DIRECT, True)[0] == TREE


# -- real meshes -------------------------------------------------------------------
def test_calls_go_down_the_tree_and_every_adverb_answers(tree, monkeypatch):
    from monarch_cy._actor.base.state import get_node
    m = tree.spawn("rec", Noter)
    assert m.note.call(0).get(30).values() == [0] * 9
    sent = count_sends(monkeypatch, get_node())
    assert m.note.call(1).get(10).values() == [1] * 9
    # the controller sent to the two heads (a heartbeat tick may fall in between)
    sent = [s for s in sent if s[0] not in (HEARTBEAT, HB_TREE)]
    assert len(sent) == 2, sent
    assert sorted(f.get(10) for f in m.note.stream(2)) == [2] * 9
    assert Accumulator(m.note, 0, lambda a, b: a + b).accumulate(3).get(10) == 27
    big = np.arange(1 << 21, dtype=np.uint8)     # through shm, forwarded untouched
    assert m.note.call(big).get(10).values()[8].sum() == big.sum()
    part = m.slice(gpus=slice(3, 8))
    assert part.note.call(4).get(10).values() == [4] * 5
    assert m.answer.call(3).get(10).values() == [6] * 9     # explicit ports: no relay
    port, recv = Channel.open_ranked()
    send(m.note, (5,), {}, port=port)
    assert sorted(recv.recv().get(10) for _ in range(9)) == [(r, 5) for r in range(9)]
    logs = m.log.call().get(10).values()
    assert [len(x) for x in logs] == [6, 6, 6, 7, 7, 7, 7, 7, 6]


def test_per_sender_fifo_holds_across_the_tree_and_direct_calls(tree, monkeypatch):
    m = tree.spawn("rec", Noter)
    m.note.call(0).get(30)
    paths = []
    real = Router.start

    def start(self, prefer, reply):
        out = real(self, prefer, reply)
        paths.append((prefer, out[0]))
        return out
    monkeypatch.setattr(Router, "start", start)
    expect = {r: [0] for r in range(9)}
    for i in range(1, 60):
        kind = i % 5
        if kind == 4:
            assert m.note.call(i).get(30).values() == [i] * 9    # confirms its path
            for r in range(9):
                expect[r].append(i)
            continue
        if kind == 0:
            m.note.broadcast(i)                  # down the tree, never confirmed
            targets = range(9)
        elif kind == 1:
            m.slice(gpus=i % 9).note.call_one(i)   # direct only when that is safe
            targets = [i % 9]
        elif kind == 2:
            m.slice(gpus=slice(1, 6)).note.broadcast(i)
            targets = range(1, 6)
        else:
            send(m.note, (i,), {}, selection="choose")
            targets = [m._rr % 9]
        for r in targets:
            expect[r].append(i)
    got = m.log.call().get(30).values()
    assert got == [expect[r] for r in range(9)]
    # both paths were taken, and each preference was overridden at least once
    assert {(TREE, TREE), (DIRECT, DIRECT), (DIRECT, TREE), (TREE, DIRECT)} <= set(paths)


def test_stop_after_a_broadcast_runs_it_first(monkeypatch, tmp_path):
    monkeypatch.setattr(cast_tree, "_FANOUT", 2)
    pm = this_host().spawn_procs(per_host={"gpus": 9})
    m = pm.spawn("rec", Noter, str(tmp_path / "seen"))
    m.note.call(0).get(30)
    for i in range(1, 6):
        m.note.broadcast(i)
    pm.stop().get(30)
    for r in range(9):
        assert (tmp_path / f"seen.{r}").read_text() == "0,1,2,3,4,5", r


def _wait_stopped(pid: int) -> None:
    """Until every thread of ``pid`` is stopped: a group stop takes effect only once
    the thread the kernel picked runs, and a nogil forwarder thread keeps forwarding
    until then."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        if states and all(st in "Tt" for st in states):
            return
        time.sleep(0.005)
    raise AssertionError(f"proc {pid} did not stop")


@pytest.mark.parametrize("path", ["io", "nogil"])
def test_a_dead_forwarder_fails_what_waits_below_it_and_respawn_heals(tree, path,
                                                                     monkeypatch):
    monkeypatch.setattr(cast_tree, "_NOGIL", path == "nogil")
    m = tree.spawn("rec", Noter)
    pids = m.pid.call().get(30).values()
    # fan-out 2 over 9: heads 0 and 5; 0 forwards to 1 and 3, which forward on
    plan = Plan(m._addrs, m._procs, range(9), 2)
    assert [p for p, _, _ in plan.heads] == [m._procs[0], m._procs[5]]
    below0 = {m._procs.index(p) for p in plan.below[m._procs[0]]}
    assert below0 == {1, 2, 3, 4}
    os.kill(pids[0], signal.SIGSTOP)             # the head stops forwarding
    try:
        _wait_stopped(pids[0])
        futs = list(m.nap.stream(1, 0.0))
        time.sleep(0.3)
        os.kill(pids[0], signal.SIGKILL)
    finally:
        try:
            os.kill(pids[0], signal.SIGCONT)
        except ProcessLookupError:
            pass
    results = []
    for f in futs:
        try:
            results.append(("ok", f.get(15)))
        except SupervisionError as e:
            results.append(("failed", e.rank, e.cause))
    failed = sorted(r[1] for r in results if r[0] == "failed")
    if path == "io":
        assert sum(1 for r in results if r[0] == "ok") == 4          # ranks 5-8
        assert failed == [0] * 5           # each names the dead head: the rank to respawn
        assert sum("route went through rank 0" in r[2] for r in results
                   if r[0] == "failed") == 4
    else:
        # The nogil forwarder may pass the cast on in the instant between SIGKILL and
        # SIGCONT ("it may or may not have reached this actor"): ranks 1-4 either way;
        # each failure names the dead head.
        assert failed and set(failed) == {0} and len(failed) <= 5
        assert sum(1 for r in results if r[0] == "ok") == 9 - len(failed)
    with pytest.raises(SupervisionError):       # the tree is broken behind it: at once
        m.slice(gpus=slice(1, 5)).note.call(2).get(5)
    tree.respawn().get(30)
    assert m.note.call(3).get(15).values() == [3] * 9


def test_calls_past_a_dead_leaf_leave_no_relay_waiting_for_it(tree):
    m = tree.spawn("rec", Noter)
    pids = list(m.pid.call().get(30).values())
    plan = Plan(m._addrs, m._procs, range(9), 2)
    assert m._procs[8] in plan.below[m._procs[5]]        # 8 answers through head 5
    os.kill(pids[8], signal.SIGKILL)
    from monarch_cy._transport.node import current_node
    deadline = time.monotonic() + 15
    while m._procs[8] not in current_node().dead:       # until the controller knows
        assert time.monotonic() < deadline, "the kill was not noticed"
        time.sleep(0.02)
    for i in range(20):
        with pytest.raises(SupervisionError):
            m.note.call(i).get(10)
    # the live ranks still got every call (the cast went around the dead one)
    assert m.slice(gpus=slice(0, 8)).log.call().get(10).values() == [list(range(20))] * 8
    held = m.slice(gpus=5).relays.call_one().get(10)
    assert held <= 1, f"head 5 holds {held} relays waiting for the dead proc"


def test_a_timed_out_call_down_the_tree_holds_it(tree):
    m = tree.spawn("rec", Noter)
    m.note.call(0).get(30)
    with pytest.raises(TimeoutError):
        m.nap.with_timeout(0.2).call(1, 0.5).get(5)
    router = cast_router.ROUTERS[m._addrs[0]]
    assert router.tree_in_use()
    assert m.slice(gpus=4).note.call_one(2).get(10) == 2      # after the nap, in order
    assert m.log.call().get(10).values()[4] == [0, 1, 2]


class _FakeNode:
    """The part of the node's public API a relay uses."""

    def __init__(self, first_pid=7):
        self.sent, self.todo, self.relays = [], [], {}
        self._pid = first_pid

    def send(self, addr, frames):
        self.sent.append((addr, frames))

    def open_relay(self, relay):
        pid, self._pid = self._pid, self._pid + 1
        self.relays[pid] = relay
        return pid

    def close_relay(self, pid):
        self.relays.pop(pid, None)

    def after_turn(self, fn):
        self.todo.append(fn)


def test_a_relay_passes_a_turns_replies_up_in_one_batch_and_big_ones_alone():
    from monarch_cy._transport.protocol import REPLY, REPLY_BATCH, unpack
    node = _FakeNode()
    relay = cast_tree.Relay(node, "up", 99, 4)
    relay.take(0, True, memoryview(pickle.dumps("a")), ())
    relay.take_batch([(1, True, pickle.dumps("b")), (2, False, pickle.dumps("c"))])
    assert node.todo == [relay.flush]           # one flush per turn of the pump
    node.todo.pop()()
    (addr, frames), = node.sent
    hdr, data = unpack(frames[0])
    assert addr == "up" and hdr == (REPLY_BATCH, 99)
    assert [(r, ok, pickle.loads(v)) for r, ok, v in pickle.loads(data)] == \
        [(0, True, "a"), (1, True, "b"), (2, False, "c")]
    assert 7 in node.relays                     # rank 3 has not answered
    relay.take(3, True, memoryview(b"desc"), [b"big buffer"])
    hdr, _ = unpack(node.sent[1][1][0])
    assert hdr == (REPLY, 99, 3, True) and node.sent[1][1][1:] == [b"big buffer"]
    node.todo.pop()()
    assert 7 not in node.relays and len(node.sent) == 2      # all answered: dropped


def test_a_gather_relay_passes_its_subtree_up_once_and_an_error_at_once():
    from monarch_cy._transport.protocol import REPLY, REPLY_BATCH, unpack
    node = _FakeNode()
    relay = cast_tree.Relay(node, "up", 99, 5, whole=True)
    relay.take(0, True, memoryview(pickle.dumps("a")), ())
    relay.take_batch([(1, True, pickle.dumps("b")), (2, True, pickle.dumps("c"))])
    relay.take(3, True, memoryview(b"desc"), [b"big buffer"])    # alone, at once
    assert node.todo == [] and len(node.sent) == 1
    hdr, _ = unpack(node.sent[0][1][0])
    assert hdr == (REPLY, 99, 3, True) and node.sent[0][1][1:] == [b"big buffer"]
    relay.take(4, True, memoryview(pickle.dumps("e")), ())         # the last: one batch
    (addr, frames), = node.sent[1:]
    hdr, data = unpack(frames[0])
    assert addr == "up" and hdr == (REPLY_BATCH, 99)
    assert [(r, ok, pickle.loads(v)) for r, ok, v in pickle.loads(data)] == \
        [(0, True, "a"), (1, True, "b"), (2, True, "c"), (4, True, "e")]
    assert 7 not in node.relays and node.todo == []

    node = _FakeNode(8)
    relay = cast_tree.Relay(node, "up", 98, 4, whole=True)
    relay.take(0, True, memoryview(pickle.dumps("a")), ())
    relay.take(1, False, memoryview(pickle.dumps("boom")), ())     # an error: at once
    (_, frames), = node.sent
    assert unpack(frames[0])[0] == (REPLY, 98, 1, False)
    relay.take_batch([(2, True, pickle.dumps("c"))])
    relay.take(3, True, memoryview(pickle.dumps("d")), ())
    assert len(node.sent) == 1 and 8 not in node.relays   # the failed call's rest: dropped


def test_each_adverb_picks_what_the_forwarders_do_with_its_replies(tree, monkeypatch):
    from monarch_cy._actor.model import routed as cast_send
    modes = []
    real = cast_tree.send_tree

    def spy(node, plan, name, *rest):
        modes.append((name, rest[-2]))
        return real(node, plan, name, *rest)
    monkeypatch.setattr(cast_tree, "send_tree", spy)
    m = tree.spawn("rec", Noter)
    m.note.call(0).get(30)
    list(f.get(10) for f in m.note.stream(1))
    Accumulator(m.note, 0, lambda a, b: a + b).accumulate(2).get(10)
    Accumulator(m.note, 0, lambda a, b: a + b, merge=lambda a, b: a + b).accumulate(3).get(10)
    m.answer.call(4).get(10)
    m.note.broadcast(5)
    assert modes == [("note", cast_tree.GATHER), ("note", cast_tree.RELAY),
                     ("note", cast_tree.GATHER), ("note", cast_tree.REDUCE),
                     ("answer", cast_tree.NO_RELAY), ("note", cast_tree.NO_RELAY)], modes
    from monarch_cy._transport.ports import BaseCollector
    # a collector that does not say otherwise takes each reply as it comes: per turn
    assert cast_send._relay_mode(True, BaseCollector(), None) == cast_tree.RELAY
    with pytest.raises(ValueError, match="mode=3 with reduce=a fold"):
        real(None, None, "note", "", 0, b"", None, b"", (), cast_tree.GATHER, b"fold")


@pytest.mark.parametrize("path", ["io_tree", "nogil_tree"])
def test_a_call_down_the_tree_comes_back_as_one_batch_per_head(path, request, monkeypatch):
    """Replies gathered per subtree, by the heads' relays or their nogil forwarders:
    the controller gets one batch per head and one reply per leaf it sent to."""
    from monarch_cy._actor.base.state import get_node
    tree = request.getfixturevalue(path)
    from monarch_cy._transport.protocol import REPLY, REPLY_BATCH, unpack
    m = tree.spawn("rec", Noter)
    assert m.note.call(0).get(30).values() == [0] * 9
    node = get_node()
    got, ports = [], set()
    real, register = node._handle_msg, node.register_port

    def counting(frames):
        got.append(unpack(frames[0])[0][:2])
        return real(frames)

    def registering(collector):      # the calls' ports (not a tree heartbeat's)
        pid = register(collector)
        if threading.current_thread() is threading.main_thread():
            ports.add(pid)
        return pid
    monkeypatch.setattr(node, "_handle_msg", counting)
    monkeypatch.setattr(node, "register_port", registering)
    for i in range(1, 6):
        assert m.note.call(i).get(10).values() == [i] * 9
    plan = cast_router.ROUTERS[m._addrs[0]].full_plan()
    assert len(ports) == 5
    replies = [k for k, port in got if k in (REPLY, REPLY_BATCH) and port in ports]
    assert replies.count(REPLY_BATCH) == 5 * len(plan.heads), (replies, plan.heads)
    assert replies.count(REPLY) == 5 * len(plan.direct), (replies, plan.direct)


def test_a_value_that_cannot_be_unpickled_inside_a_batch_fails_the_call(tree):
    from monarch_cy.actor import ActorError
    m = tree.spawn("rec", Noter)
    m.note.call(0).get(30)
    with pytest.raises(ActorError, match="could not be unpickled") as ei:
        m.unpicklable_at.call(5, 1).get(10)          # rank 5 lies below a forwarder
    assert "unpickled in the wrong place" in str(ei.value)
    assert m.unpicklable_at.call(-1, 2).get(10).values() == [2] * 9


@pytest.mark.parametrize("n,k", [(17, 16), (31, 16), (128, 16), (272, 16), (1024, 16),
                                 (5000, 16), (50, 3)])
def test_chunks_cover_the_range_in_order_and_keep_forwarders_few(n, k):
    parts = list(cast_tree._chunks(0, n, k))
    assert len(parts) <= k
    assert parts[0][0] == 0 and parts[-1][1] == n
    assert all(a < b and b == c for (a, b), (c, _) in zip(parts, parts[1:] + [(n, n)]))
    if n <= k * (k + 1):          # one level below suffices: heads of at most k + 1
        assert all(b - a <= k + 1 for a, b in parts)
        heads = sum(1 for a, b in parts if b - a > 1)
        assert heads == -(-(n - k) // k)


def test_a_thousand_ranks_need_few_forwarding_procs():
    n, k = 1024, 16
    plan = Plan(tuple(range(n)), tuple(f"p{i}" for i in range(n)), range(n), k)
    forwarders = [p for p, under in plan.below.items()]
    assert len(forwarders) <= 16 + 16 * 3           # the rest are leaves
    reached, _ = _walk(plan)
    assert max(h for _, h in reached.values()) <= 3


def test_a_call_that_cannot_be_sent_leaves_the_router_free(tree):
    import threading
    m = tree.spawn("rec", Noter)
    m.note.call(0).get(30)
    router = cast_router.ROUTERS[m._addrs[0]]
    with pytest.raises(TypeError, match="cannot be sent"):
        m.note.call(threading.Lock())               # down the tree: unpicklable
    with pytest.raises(TypeError, match="cannot be sent"):
        m.slice(gpus=2).note.call_one(threading.Lock())   # direct: unpicklable

    class RaisesOnPickle:
        def __reduce__(self):
            raise RuntimeError("reduce refused")
    with pytest.raises(RuntimeError, match="reduce refused"):
        m.note.call(RaisesOnPickle())               # down the tree: the object's own error
    assert router.open == [0, 0] and router.held == [0, 0]
