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

Failures are routed around, as casts are (:func:`.tree.route_around`): procs known
dead are not in the tree, and a forwarder that dies without passing the stop on (its
exit is not the clean one of a STOP) is reported by the caller to :func:`resend`,
which stops the procs below it directly; so every live proc runs its actors'
``__cleanup__`` whatever died above it, in the time a stop takes anyway.  What is
left alive after the stop's grace period is killed.
"""

from __future__ import annotations

from monarch_cy._actor.cast.tree import Plan, fanout, pass_on, route, send_down
from monarch_cy._transport.protocol import STOP, STOP_TREE, pack

__all__ = ["send", "resend", "forward", "STOP_TREE"]


def send(node, stops) -> dict:
    """``stops``: ``[(proc, actor addresses already sent __stop__)]``, down the tree
    (the caller leaves out procs known dead).  Returns the tree's ``below`` map
    (forwarder proc key -> the proc keys under it), for :func:`resend`."""
    keys = tuple(p.key for p, _ in stops)
    targets = tuple((p.key, sent) for p, sent in stops)
    plan = Plan(targets, keys, range(len(keys)), fanout())
    send_down(node, plan, pack((STOP_TREE,)), (),
              lambda _, t: (t[0], [pack((STOP, t[1]))]))
    return plan.below


def resend(node, belows, dead_key, stops, repost) -> int:
    """The forwarder ``dead_key`` died during a stop: stop directly each proc its
    part of the stop went through, per the ``below`` maps of the trees used
    (:func:`send`'s, and those of the trees ``__stop__`` went down).  ``stops``: proc
    key -> ``(actor addresses already sent __stop__, still to stop?)``; ``repost(
    addrs)`` posts ``__stop__`` to actors again (theirs may have been lost with the
    forwarder).  A STOP a proc already got is ignored there.  Returns how many procs
    were sent a STOP."""
    under = set()
    for below in belows:
        under.update(below.get(dead_key, ()))
    n = 0
    for key in under:
        ent = stops.get(key)
        if ent is None or not ent[1]():
            continue
        repost(ent[0])
        try:
            node.send(key, [pack((STOP, ent[0]))])
            n += 1
        except Exception:  # noqa: BLE001 - the grace period's kill covers it
            pass
    return n


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
