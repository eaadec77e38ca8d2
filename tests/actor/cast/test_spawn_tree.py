"""Spawning down the cast tree (monarch_cy._actor.cast.spawn): the controller sends a
spawn to the heads only, and every actor starts where and as it would have (fan-out
2 here, so 9 procs make a 3-level tree)."""

from __future__ import annotations

import os

import numpy as np

from monarch_cy._transport.protocol import SPAWN, SPAWN_TREE
from _actors import Noter
from _sends import count_sends


def _spawns(monkeypatch):
    from monarch_cy._actor.base.state import get_node
    return count_sends(monkeypatch, get_node(), (SPAWN, SPAWN_TREE))


def test_a_large_spawn_leaves_the_controller_as_one_message_per_head(tree, monkeypatch):
    pids = tree.spawn("p", Noter).pid.call().get(30).values()   # procs up, direct
    sent = _spawns(monkeypatch)
    big = "x" * (3 << 20)                  # the argument travels in shared memory
    m = tree.spawn("t", Noter, big)
    assert [k for k, _ in sent] == [SPAWN_TREE, SPAWN_TREE], sent
    got = m.whoami.call().get(30).values()
    assert [g[:2] for g in got] == [(r, r) for r in range(9)]
    assert [g[2] for g in got] == pids                 # actor r on proc r
    assert {g[3] for g in got} == {len(big)}
    assert m.note.call(7).get(10).values() == [7] * 9


def test_a_slice_spawns_down_the_tree_and_a_small_one_directly(tree, monkeypatch):
    pids = tree.spawn("p", Noter).pid.call().get(30).values()
    sent = _spawns(monkeypatch)
    part = tree.slice(gpus=slice(1, 8))     # 7 procs: down the tree
    m = part.spawn("s", Noter)
    assert all(k == SPAWN_TREE for k, _ in sent) and len(sent) <= 2, sent
    got = m.whoami.call().get(30).values()
    assert [g[:2] for g in got] == [(r, r) for r in range(7)]   # the slice's own ranks
    assert [g[2] for g in got] == pids[1:8]                     # on procs 1..7
    sent.clear()
    two = tree.slice(gpus=slice(3, 5)).spawn("d", Noter)   # 2 procs <= fan-out
    assert [k for k, _ in sent] == [SPAWN, SPAWN]
    assert two.note.call(1).get(10).values() == [1, 1]
    arr = np.arange(10)
    assert m.note.call(arr).get(10).values()[6].sum() == arr.sum()


def test_a_large_stop_leaves_the_controller_as_one_message_per_head(monkeypatch,
                                                                    tmp_path):
    import time
    from monarch_cy._actor.cast import tree as cast_tree
    from monarch_cy._actor.base.state import get_node
    from monarch_cy._transport.protocol import STOP, STOP_TREE
    from monarch_cy.actor import this_host
    monkeypatch.setattr(cast_tree, "_FANOUT", 2)
    pm = this_host().spawn_procs(per_host={"gpus": 9})
    idle = pm.spawn("idle", Noter, str(tmp_path / "idle"))       # all calls answered
    busy = pm.spawn("busy", Noter, str(tmp_path / "busy"))
    assert idle.note.call(1).get(30).values() == [1] * 9
    busy.note.call(1).get(30)
    for i in (2, 3):
        busy.note.broadcast(i)                 # still in flight down the tree
    pids = idle.pid.call().get(30).values()
    sent = count_sends(monkeypatch, get_node(), (STOP, STOP_TREE))
    t0 = time.monotonic()
    pm.stop().get(30)
    assert [k for k, _ in sent] == [STOP_TREE, STOP_TREE], sent
    assert time.monotonic() - t0 < 2.5, "the stop waited for the grace period's kill"
    for r in range(9):                         # every actor cleaned up, in order
        assert (tmp_path / f"idle.{r}").read_text() == "1", r
        assert (tmp_path / f"busy.{r}").read_text() == "1,2,3", r
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or \
            open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
