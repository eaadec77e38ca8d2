"""Heartbeats down the cast tree: a few messages per tick instead of two per proc.

When more procs of a proc mesh are due a heartbeat than ``MONARCH_CY_CAST_FANOUT``,
the controller's tick (:mod:`monarch_cy._actor.meshes.heartbeat`) sends one ``HB_TREE`` message to each head
of the tree that :class:`.tree.Plan` lays over those procs.  Each proc's I/O
thread (the pump, the thread a heartbeat tests) forwards it to the heads below it,
sends it to the leaves it delivers to, and answers for itself.  The answers of a
subtree come back up through a :class:`.tree.Relay` of each forwarder, in a
batch per turn of its pump, so the controller sends at most ``fanout`` messages per
tick and receives about one batch per head.

Nothing is judged on a tree heartbeat alone.  A proc whose answer did not come back
by the next tick (its forwarder died, hangs or is slow, or it is) is sent the next
heartbeat directly, and only direct heartbeats lead to a verdict, as before.  So a
broken forwarder costs its subtree one interval, never a false failure.  A
forwarder's relay for one tick is dropped after the heartbeat timeout, so a subtree
that never answers leaks nothing.
"""

from __future__ import annotations

import pickle
import time

from monarch_cy._actor.cast.tree import Plan, Relay, fanout, pass_on, route, send_down
from monarch_cy._transport.ports import BaseCollector
from monarch_cy._transport.protocol import HB_TREE, REPLY, pack

__all__ = ["split", "send", "forward", "Answers", "HB_TREE", "PLANS"]

_NONE = pickle.dumps(None)         # the body of an answer (nothing to say)


def split(procs, now: float):
    """``(by tree, directly)``: the procs due a heartbeat, split (see the module
    docstring).  Marks those sent down the tree."""
    k = fanout()
    tree, direct = [], []
    for p in procs:                    # unanswered last time down the tree: directly
        (direct if p.hb_tree_at > p.last_seen else tree).append(p)
    if not k or len(tree) <= k:
        return [], direct + tree
    for p in tree:
        p.hb_tree_at = now
    return tree, direct


class Answers(BaseCollector):
    """The controller's collector of one tree heartbeat: each answer marks its proc
    seen (as a ``HEARTBEAT_ACK`` does)."""

    __slots__ = ("procs", "left")

    def __init__(self, procs) -> None:
        self.procs, self.left = procs, len(procs)

    def deliver(self, rank, ok, value) -> bool:
        p = self.procs[rank]
        p.last_seen = time.monotonic()
        p.up.set()
        self.left -= 1
        return self.left <= 0

    def proc_failed(self, proc, cause) -> bool:
        return False           # the next tick sends the rest directly


class _Plans:
    """The last plan per proc mesh (most ticks send to the same procs)."""

    def __init__(self) -> None:
        self.last = {}

    def get(self, state, keys: tuple, k: int) -> Plan:
        hit = self.last.get(id(state))
        if hit is not None and hit[0] == keys:
            return hit[1]
        plan = Plan(keys, keys, range(len(keys)), k)
        self.last[id(state)] = (keys, plan)
        return plan

    def forget(self, state) -> None:
        self.last.pop(id(state), None)


PLANS = _Plans()


def send(node, state, procs, timeout: float) -> None:
    """One heartbeat to ``procs`` (of proc mesh ``state``) down their tree, from the
    controller's pump.  Answers are taken for ``timeout`` seconds."""
    keys = tuple(p.key for p in procs)
    plan = PLANS.get(state, keys, fanout())
    pid = node.register_port(Answers(procs))
    node.add_timer(timeout, lambda: node.drop_port(pid))
    f0 = pack((HB_TREE, node.addr, pid, node.key, timeout))
    send_down(node, plan, f0, (),
              lambda local, addr: (addr, [f0, pickle.dumps(([(local, addr)], []), 5)]))


def forward(node, hdr, data, frames) -> None:
    """HB_TREE in a proc's pump: pass it on down, answer for this proc."""
    _, raddr, port_id, key, life = hdr[:5]
    here, children = route(frames)
    n = len(here) + sum(c for _, c, _ in children)
    relay = None
    if n > 1:                  # answers from below come here and go up in batches
        relay = Relay(node, raddr, port_id, n)
        pid = relay.pid
        node.add_timer(life, lambda: node.close_relay(pid))
        raddr, port_id = node.addr, pid
    f0 = pack((HB_TREE, raddr, port_id, key, life))
    pass_on(node, children, f0)     # whom this misses, the next tick reaches directly
    for local, addr in here:
        if addr == node.key:
            if relay is not None:
                relay.take(local, True, _NONE, ())
            else:
                _try_send(node, raddr, [pack((REPLY, port_id, local, True), _NONE)])
        else:
            _try_send(node, addr, [f0, pickle.dumps(([(local, addr)], []), 5)])


def _try_send(node, addr, frames) -> None:
    try:
        node.send(addr, frames)
    except Exception:  # noqa: BLE001 - the next tick goes directly to whom this missed
        pass

