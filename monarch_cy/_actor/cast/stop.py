"""Stopping a large proc mesh down the cast tree: the controller sends a few messages.

``ProcMesh.stop`` on more live procs than ``MONARCH_CY_CAST_FANOUT`` sends one
``STOP_TREE`` message to each head of the tree that :class:`.tree.Plan` lays
over them, instead of one ``STOP`` per proc.  Each proc's I/O thread passes it on
to the heads below and the leaves it delivers to *first*, then stops itself (a
proc's STOP ends with its exit).  Each target carries the actor addresses the
controller already sent ``__stop__`` to (down an actor mesh's tree, or directly);
the proc posts ``__stop__`` to its other actors itself, which is safe because
those are the actors of meshes with no call of the controller in flight
(:func:`.router.stop_down_trees`).

A proc that dies before passing the stop on leaves its subtree running until the
stop's grace period ends; then the controller kills every proc still alive, as it
does for a proc that does not exit on a direct STOP.
"""

from __future__ import annotations

from monarch_cy._actor.cast.tree import Plan, fanout, pass_on, route, send_down
from monarch_cy._transport.protocol import STOP, STOP_TREE, pack

__all__ = ["send", "forward", "STOP_TREE"]


def send(node, stops) -> None:
    """``stops``: ``[(proc, actor addresses already sent __stop__)]``, down the tree."""
    keys = tuple(p.key for p, _ in stops)
    targets = tuple((p.key, sent) for p, sent in stops)
    plan = Plan(targets, keys, range(len(keys)), fanout())
    send_down(node, plan, pack((STOP_TREE,)), (),
              lambda _, t: (t[0], [pack((STOP, t[1]))]))


def forward(node, hdr, data, frames, stop) -> None:
    """STOP_TREE in a proc's pump: pass it on down, then ``stop`` this proc (the
    proc's own STOP handler, which does not return)."""
    here, children = route(frames)
    mine = None
    pass_on(node, children, pack(hdr))      # the stop's grace period covers failures
    for _, (key, sent) in here:
        if key == node.key:
            mine = sent
        else:
            try:
                node.send(key, [pack((STOP, sent))])
            except Exception:  # noqa: BLE001
                pass
    if mine is not None:      # what was passed on is flushed before the proc exits
        stop(node, (STOP, mine), b"", [])
