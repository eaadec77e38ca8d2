"""Heartbeats (monarch_cy._actor.meshes.heartbeat): starved or busy is not dead.

A proc that does not answer heartbeats but is making progress (using CPU, or
runnable and waiting for one) is left alone; one that is stopped or asleep using
no CPU is failed at the timeout (tests/actor/test_supervision.py covers SIGSTOP and
a wedged interpreter)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from _actors import Busy
from monarch_cy._actor.meshes import heartbeat
from monarch_cy.actor import this_host




@pytest.mark.parametrize("state,cpu,wchan,expected", [
    ("T", 0.0, "do_signal_stop", "stopped"), ("t", 0.5, "ptrace_stop", "stopped"),
    ("S", 0.0, "futex_do_wait", "hung"), ("S", 0.0, "", "hung"),
    ("S", 0.0, "poll_schedule_timeout.constprop.0", "waiting"),
    ("S", 0.0, "do_epoll_wait", "waiting"), ("S", 0.01, "futex_do_wait", "busy"),
    ("R", 0.0, "", "starved"), ("S", 0.0, "0", "starved"), ("D", 0.0, "", "starved"), ("R", 1.0, "", "busy"),
])
def test_verdict(state, cpu, wchan, expected):
    assert heartbeat.verdict(state, cpu, wchan) == expected


def test_busy_bound_is_longer_than_the_timeout():
    assert heartbeat.busy_bound(0.5) == 60.0 and heartbeat.busy_bound(10) == 100.0


def test_a_busy_proc_holding_the_gil_is_not_declared_hung(hook):
    pm = this_host().spawn_procs(per_host={"gpus": 1}, heartbeat_timeout=0.5)
    b = pm.spawn("busy", Busy)
    assert b.spin.call_one(0.05).get(10)
    assert b.spin.call_one(3.0).get(20)      # 6 timeouts without an answer
    assert b.spin.call_one(0.01).get(10)      # still the same, healthy proc
    assert not hook
    pm.stop().get(10)


def test_a_big_message_does_not_get_a_healthy_proc_killed(hook):
    pm = this_host().spawn_procs(per_host={"gpus": 2}, heartbeat_timeout=0.3)
    b = pm.spawn("big", Busy)
    arr = np.ones(256 << 20, dtype=np.uint8)
    for _ in range(3):
        assert b.nbytes.call(arr).get(60).values() == [arr.nbytes] * 2
    assert not hook
    pm.stop().get(10)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_sample_reads_this_process():
    state, cpu, wchan = heartbeat._sample(os.getpid())
    assert state in ("R", "S") and cpu > 0 and isinstance(wchan, str)


def test_procs_answering_calls_down_the_tree_need_no_heartbeat(monkeypatch):
    import time
    from monarch_cy._actor.cast import router as cast_router
    from monarch_cy._actor.cast import tree as cast_tree
    from monarch_cy._actor.base.state import get_node
    from monarch_cy._transport.protocol import HB_TREE, HEARTBEAT
    from _actors import Noter
    from _sends import count_sends
    monkeypatch.setattr(cast_tree, "_FANOUT", 2)
    monkeypatch.setattr(cast_router, "_ALIVE_EVERY_S", 0.02)
    # interval 0.1 s: ten heartbeats a second per proc when none is skipped
    pm = this_host().spawn_procs(per_host={"gpus": 6}, heartbeat_timeout=0.4)
    try:
        m = pm.spawn("n", Noter)
        m.note.call(0).get(30)
        node = get_node()
        beats = count_sends(monkeypatch, node, (HEARTBEAT, HB_TREE))
        end = time.monotonic() + 1.0
        while time.monotonic() < end:          # a busy loop of whole-mesh calls
            m.note.call(1).get(10)
        busy = len(beats)
        time.sleep(1.0)                        # idle: the heartbeats come back
        idle = len(beats) - busy
        assert busy <= 6, f"{busy} heartbeats while every proc kept answering"
        assert idle >= 2 * 4, f"only {idle} heartbeats (to 2 heads) in 1 s of idle"
        assert m.note.call(2).get(10).values() == [2] * 6
    finally:
        pm.stop().get(30)


def test_heartbeats_go_down_the_tree_and_a_stopped_forwarder_fails_alone(monkeypatch,
                                                                         hook):
    import signal
    import time
    from monarch_cy._actor.cast import tree as cast_tree
    from monarch_cy._actor.cast.tree import Plan
    from monarch_cy._actor.base.state import get_node
    from monarch_cy._transport.protocol import HB_TREE, HEARTBEAT
    from _actors import Noter
    from _sends import count_sends
    monkeypatch.setattr(cast_tree, "_FANOUT", 2)
    pm = this_host().spawn_procs(per_host={"gpus": 9}, heartbeat_timeout=0.8)
    try:
        m = pm.spawn("n", Noter)
        pids = [m.slice(gpus=r).pid.call_one().get(30) for r in range(9)]  # direct
        node = get_node()
        sent = count_sends(monkeypatch, node, (HB_TREE, HEARTBEAT))

        def to(kind):
            return [a for k, a in sent if k == kind]
        time.sleep(1.0)                        # 5 ticks of 0.2 s
        assert len(to(HB_TREE)) / 2 >= 3, sent  # two heads a tick, not one per proc
        assert len(sent) <= 3 * 6, sent
        assert all(p.up.is_set() for p in pm._state.procs)
        # head 0 forwards to 1..4: stopped, its subtree is heartbeaten directly and
        # only the stopped proc fails
        keys = tuple(p.key for p in pm._state.procs)
        plan = Plan(keys, keys, range(9), 2)
        assert plan.heads[0][0] == keys[0] and set(plan.below[keys[0]]) == set(keys[1:5])
        os.kill(pids[0], signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 10
            while not hook and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            try:
                os.kill(pids[0], signal.SIGCONT)
            except ProcessLookupError:
                pass
        assert hook and hook[0].ranks == (0,), hook
        assert "stopped" in hook[0].report()
        assert {keys.index(a) for a in to(HEARTBEAT)} >= {1, 2, 3, 4}
        for r in range(1, 9):                  # the rest were never failed
            assert m.slice(gpus=r).note.call_one(r).get(10) == r
        assert len(hook) == 1
    finally:
        pm.stop().get(30)
