"""A head whose actor is busy does not hold back its subtree (issue 35, item 3): the
nogil forwarders (monarch_cy._transport.fanout) pass casts on while the head's actor
keeps the GIL in C or spins in Python, and gather the subtree's replies the same way.

Fan-out 2 over 9 procs: proc 0 heads ranks 1-4 (a 3-level tree).  Each test makes
rank 0's actor busy with a ``broadcast`` (so the router keeps later calls on the tree),
then times calls to ranks 1-4 against the same calls with the tree off.  The nogil
forwarders are the default on one host; these tests turn them on whatever the
environment says."""

from __future__ import annotations

import statistics
import time

import pytest

from monarch_cy._actor.cast import tree as cast_tree
from monarch_cy._actor.cast.tree import Plan
from _actors import BusyHead

HOLD_S = 5.0


def _times(mesh, n=5) -> list:
    """Seconds for each of ``n`` calls to ranks 1-4 (a slice that takes the tree)."""
    part = mesh.slice(gpus=slice(1, 5))
    out = []
    for i in range(n):
        t = time.monotonic()
        assert part.ping.call(i).get(30).values() == [i] * 4
        out.append(time.monotonic() - t)
    return out


def _tree_off(tree, monkeypatch) -> float:
    """The slowest of 5 calls to ranks 1-4 with the tree off (every send direct)."""
    monkeypatch.setattr(cast_tree, "_FANOUT", 0)
    m = tree.spawn("busy_off", BusyHead)
    try:
        m.ping.call(0).get(30)
        return max(_times(m))
    finally:
        m.stop().get(30)
        monkeypatch.setattr(cast_tree, "_FANOUT", 2)


def _busy_mesh(tree):
    m = tree.spawn("busy", BusyHead)
    pids = m.pid.call().get(30).values()
    plan = Plan(m._addrs, m._procs, range(9), 2)
    assert [p for p, _, _ in plan.heads] == [m._procs[0], m._procs[5]]
    assert {m._procs.index(p) for p in plan.below[m._procs[0]]} == {1, 2, 3, 4}
    _times(m, 2)                                   # warm: every connection made
    return m, pids[0]


def test_calls_below_a_head_holding_the_gil_in_c_answer_as_with_the_tree_off(
        nogil_tree, monkeypatch):
    tree = nogil_tree
    off = _tree_off(tree, monkeypatch)
    m, head = _busy_mesh(tree)
    t0 = time.monotonic()
    m.hold_gil.broadcast(head, HOLD_S)
    time.sleep(0.3)                                # the head's actor holds the GIL now
    busy = _times(m)
    assert time.monotonic() - t0 < HOLD_S - 1      # all of it while the GIL was held
    print(f"\nranks 1-4, head holding the GIL in C: max {max(busy) * 1e3:.1f} ms, "
          f"median {statistics.median(busy) * 1e3:.1f} ms; tree off: max "
          f"{off * 1e3:.1f} ms")
    assert max(busy) < max(0.5, 3 * off), (busy, off)
    assert m.ping.call(1).get(HOLD_S + 30).values() == [1] * 9   # the head answers after


def test_calls_below_a_head_spinning_in_python_answer_as_with_the_tree_off(
        nogil_tree, monkeypatch):
    tree = nogil_tree
    off = _tree_off(tree, monkeypatch)
    m, head = _busy_mesh(tree)
    m.spin.broadcast(head, HOLD_S, 0.5)            # the GIL for 0.5 s at a time
    time.sleep(0.3)
    busy = _times(m)
    print(f"\nranks 1-4, head spinning in Python: max {max(busy) * 1e3:.1f} ms, "
          f"median {statistics.median(busy) * 1e3:.1f} ms; tree off: max "
          f"{off * 1e3:.1f} ms")
    assert max(busy) < max(0.25, 3 * off), (busy, off)
    assert m.ping.call(1).get(HOLD_S + 30).values() == [1] * 9
