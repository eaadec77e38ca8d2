"""Spawning an actor mesh down the cast tree: the controller sends a few messages.

``ProcMesh.spawn`` from the controller onto more procs than
``MONARCH_CY_CAST_FANOUT`` sends one ``SPAWN_TREE`` message to each head of the tree
that :class:`.cast_tree.Plan` lays over those procs, instead of one ``SPAWN`` per
proc.  Each proc's I/O thread forwards it to the heads below, turns it into the
plain ``SPAWN`` of each leaf it delivers to, and spawns its own actor
(:func:`.actor_host.handle_spawn`).  The class and arguments are pickled once, at
the controller, and travel unchanged (buffers placed in shared memory are opened by
each proc, as with direct sends).  So the controller neither sends to nor connects
to every proc of a large mesh to start its actors.

Calls made right after ``spawn`` need no ordering with it: an actor's socket is
bound when its ``SPAWN`` is handled, and messages sent to it before that wait in
the sender's connection until it is (as with direct spawns).  A proc already known
dead fails the spawn before anything is sent (``ProcMesh.spawn`` checks); one that
dies while the spawn travels takes the undelivered part of its subtree with it,
and calls to those actors fail through supervision, as for any call to a dead proc.
"""

from __future__ import annotations

import pickle

from monarch_cy._actor.cast_tree import Plan, _buf, fanout, pass_on, send_to_heads
from monarch_cy._transport.protocol import SPAWN, SPAWN_TREE, pack

__all__ = ["use_tree", "send", "forward", "SPAWN_TREE"]


def use_tree(node, procs) -> bool:
    """Whether a spawn from this node onto ``procs`` goes down the tree."""
    k = fanout()
    return node.is_controller and bool(k) and len(procs) > k


def send(node, procs, name, addrs, ext, owner, data, extras) -> None:
    """The spawn of actor ``i`` (address ``addrs[i]``) on ``procs[i]``, for each ``i``,
    down the tree; ``data``/``extras``: ``(cls, args, kwargs)`` encoded for every proc."""
    keys = tuple(p.key for p in procs)
    targets = tuple((p.key, a, p.rank) for p, a in zip(procs, addrs))
    plan = Plan(targets, keys, range(len(keys)), fanout())
    f0 = pack((SPAWN_TREE, name, tuple(ext.labels), tuple(ext.sizes), owner), data)
    send_to_heads(node, plan, f0, extras)
    for local, (key, addr, prank) in plan.direct:
        node.send(key, [_spawn_frame(name, addr, local, ext.labels, ext.sizes, prank,
                                     owner, data), *extras])


def _spawn_frame(name, addr, local, labels, sizes, prank, owner, data):
    return pack((SPAWN, name, addr, local, tuple(labels), tuple(sizes), prank, owner),
                data)


def forward(node, hdr, data, frames) -> None:
    """SPAWN_TREE in a proc's pump: pass it on down, spawn this proc's actor."""
    from monarch_cy._actor.actor_host import handle_spawn
    _, name, labels, sizes, owner = hdr[:5]
    here, children = pickle.loads(_buf(frames[0]))
    extras = [_buf(f) for f in frames[1:]]
    if children:
        pass_on(node, children, pack(hdr, data), extras, f"the spawn of {name}")
    for local, (key, addr, prank) in here:
        if key == node.key:
            handle_spawn(node, (SPAWN, name, addr, local, labels, sizes, prank, owner),
                         data, extras)
        else:
            node.send(key, [_spawn_frame(name, addr, local, labels, sizes, prank, owner,
                                         data), *extras])
