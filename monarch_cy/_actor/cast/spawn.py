"""Spawning an actor mesh down the cast tree: the controller sends a few messages.

``ProcMesh.spawn`` from the controller onto more procs than
``MONARCH_CY_CAST_FANOUT`` sends one ``SPAWN_TREE`` message to each head of the tree
that :class:`.tree.Plan` lays over those procs, instead of one ``SPAWN`` per
proc.  Each proc's I/O thread forwards it to the heads below, turns it into the
plain ``SPAWN`` of each leaf it delivers to, and spawns its own actor
(:func:`monarch_cy._actor.host.actor_host.handle_spawn`).  The class and arguments are pickled once, at
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

from monarch_cy._actor.cast.tree import Plan, fanout, pass_on, route, send_down
from monarch_cy._transport.protocol import SPAWN, SPAWN_TREE, buf, pack

__all__ = ["send", "forward", "SPAWN_TREE"]


def send(node, procs, name, addrs, ext, owner, data, extras) -> None:
    """The spawn of actor ``i`` (address ``addrs[i]``) on ``procs[i]``, for each ``i``,
    down the tree; ``data``/``extras``: ``(cls, args, kwargs)`` encoded for every proc."""
    keys = tuple(p.key for p in procs)
    targets = tuple((p.key, a, p.rank) for p, a in zip(procs, addrs))
    plan = Plan(targets, keys, range(len(keys)), fanout())
    f0 = pack((SPAWN_TREE, name, tuple(ext.labels), tuple(ext.sizes), owner), data)
    send_down(node, plan, f0, extras, lambda local, t: (t[0], [
        _spawn_frame(name, t[1], local, ext.labels, ext.sizes, t[2], owner, data), *extras]))


def _spawn_frame(name, addr, local, labels, sizes, prank, owner, data):
    return pack((SPAWN, name, addr, local, tuple(labels), tuple(sizes), prank, owner),
                data)


def forward(node, hdr, data, frames, handle_spawn) -> None:
    """SPAWN_TREE in a proc's pump: pass it on down, spawn this proc's actor with
    ``handle_spawn`` (the hosting floor's SPAWN handler)."""
    _, name, labels, sizes, owner = hdr[:5]
    here, children = route(frames)
    extras = [buf(f) for f in frames[1:]]
    if children:
        pass_on(node, children, pack(hdr, data), extras, f"the spawn of {name}")
    for local, (key, addr, prank) in here:
        if key == node.key:
            handle_spawn(node, (SPAWN, name, addr, local, labels, sizes, prank, owner),
                         data, extras)
        else:
            node.send(key, [_spawn_frame(name, addr, local, labels, sizes, prank, owner,
                                         data), *extras])
