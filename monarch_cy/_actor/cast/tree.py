"""Casts down a tree: the controller's call to a large mesh leaves as a few messages.

A call from the controller to more actors than ``MONARCH_CY_CAST_FANOUT`` (default 16)
is sent as one message to each of at most ``fanout`` *heads*; each head's proc
forwards the message to at most ``fanout`` heads below it and delivers it to its own
actor.  The controller's sends per call drop from the mesh size to the fan-out, and
the forwarding work is spread over the procs.

Who forwards.  Where every proc is ``unix://`` and ``MONARCH_CY_CAST_NOGIL`` is on
(the default), each proc's nogil forwarder (:mod:`monarch_cy._transport.fanout`: a C
thread that never takes the GIL) passes the call on (:func:`_send_fan`, the plan's
``fan`` routes) and gathers its subtree's replies as the relays below would (``call``
and ``Accumulator`` whole, ``stream`` per turn of its loop; a fold is the
controller's): an actor holding its proc's GIL, in C or in a Python loop, holds back
nothing below it.  Otherwise the ``CAST`` goes to each head's node and its pump
thread (never the actor's thread, but one needing the GIL) runs :func:`forward`, and
its :class:`Relay` or :class:`.reduce.ReduceRelay` gathers or folds the subtree's
replies.

The tree is fixed per actor mesh: ranks ``[0, n)`` are split into at most
``fanout`` contiguous chunks (:func:`_chunks`), the first rank of each chunk is
its head, and the rest of a chunk is split the same way below its head; a chunk
of one rank is a leaf, delivered to by the hop above.  A slice travels the same tree,
pruned to the heads that lead to its ranks (a head outside the slice only
forwards).  Depth is about ``log_fanout(n)``.

Ordering: per-sender FIFO across tree and direct sends is the router's
(:mod:`.router`).

Failures.  A head that dies takes the undelivered part of its subtree with it;
calls still waiting on ranks below it fail with :class:`SupervisionError` whose
``rank`` is the dead forwarder's (the rank to respawn; they may or may not have
run), never hang.  A stop (``__stop_mesh__``; a proc mesh's stop, :mod:`.stop`) is
instead re-sent directly to the live ranks below a dead forwarder.  A cast whose route
crosses a proc already known dead fails those ranks at once, until the proc is
respawned, and travels the tree without them (:func:`route_around`).  A ``broadcast`` lost that way is reported by the dead proc's own
supervision event.  Only the controller casts down trees; calls made inside
actors go directly.
"""

from __future__ import annotations

import pickle
from bisect import bisect_left

from monarch_cy import _config
from monarch_cy._actor.base.state import proc_failure
from monarch_cy._actor.cast.reduce import ReduceRelay
from monarch_cy._transport import fanout as _fo
from monarch_cy._transport.protocol import (CAST, REPLY, REPLY_BATCH, REPLY_PARTIAL, buf,
                                            pack, pack_call)

__all__ = ["Plan", "Relay", "forward", "send_tree", "send_down", "pass_on", "route",
           "use_tree", "route_around", "fanout", "CAST", "NO_RELAY", "RELAY", "REDUCE",
           "GATHER"]

_FANOUT = None
_NOGIL = None
_dumps = pickle.dumps


def fanout() -> int:
    """``MONARCH_CY_CAST_FANOUT``, read once."""
    global _FANOUT
    if _FANOUT is None:
        _FANOUT = _config.cast_fanout()
    return _FANOUT


def nogil() -> bool:
    """``MONARCH_CY_CAST_NOGIL``, read once: casts go down the procs' nogil
    forwarders (:mod:`monarch_cy._transport.fanout`) where a plan allows."""
    global _NOGIL
    if _NOGIL is None:
        _NOGIL = _config.cast_nogil()
    return _NOGIL


def _chunks(lo: int, hi: int, k: int):
    """``[lo, hi)`` split into at most ``k`` contiguous ranges (fixed by ``lo, hi, k``
    alone).  A range of one rank is a leaf its parent delivers to itself; so where one
    more level suffices (ranges of at most ``k + 1``: a head and its leaves) as few
    heads as possible are made and the rest are leaves, which keeps the procs whose
    I/O thread must forward few; above that, near-equal ranges."""
    n = hi - lo
    if n <= 0:
        return
    if n <= k:
        yield from ((i, i + 1) for i in range(lo, hi))
        return
    if -(-n // k) > k + 1:                  # balanced: near-equal ranges
        q, r = divmod(n, k)
        a = lo
        for i in range(k):
            b = a + q + (1 if i < r else 0)
            yield a, b
            a = b
        return
    m = -(-(n - k) // k)                     # heads of at most k + 1; the rest leaves
    q, r = divmod(n - (k - m), m)
    a = lo
    for i in range(m):
        b = a + q + (1 if i < r else 0)
        yield a, b
        a = b
    yield from ((i, i + 1) for i in range(a, hi))


class Plan:
    """The route of one set of ranks through a mesh's fixed tree (built once per
    mesh view and reused).

    ``heads``: ``[(proc key, targets under it, route bytes)]`` the sender sends to; ``below``: proc key
    of each forwarder -> the proc keys of the targets under it (to fail them when it
    dies); ``direct``: ``[(call rank, actor address)]`` the sender delivers to itself
    (one-rank chunks); ``procs``: every proc on the route (targets and forwarders);
    ``rank_of``: proc key of each forwarder -> its rank in the mesh (the rank to
    respawn when it died); ``fan``: ``[(proc key, fan-out route)]`` of the same heads
    for their nogil forwarders (:mod:`monarch_cy._transport.fanout`), or None where
    the casts go through the I/O threads (``MONARCH_CY_CAST_NOGIL=0``, or an address
    that is not ``unix://``)."""

    __slots__ = ("heads", "direct", "below", "procs", "rank_of", "fan")

    def __init__(self, addrs, procs, granks, k: int, skip=(), fan: bool = False) -> None:
        # skip: global ranks of the call not to route (see route_around); fan: a plan
        # for calls (addrs are actor addresses), which may take the nogil forwarders
        local = sorted((i for i in range(len(granks)) if granks[i] not in skip),
                       key=granks.__getitem__)                      # call ranks, ...
        tg = [granks[i] for i in local]           # ... by their global rank, sorted
        self.below = {}
        self.procs = set()
        self.rank_of = {}
        fan = fan and nogil() and all(map(_fo.usable, addrs)) and all(map(_fo.usable, procs))

        def build(lo, hi, i0, i1, up):
            # targets tg[i0:i1] lie in [lo, hi); returns ([(proc, count, bytes)] of the
            # heads, [(local, addr)] of the one-rank chunks the caller delivers to
            # itself, [(proc, fan-out route)] of the heads)
            out, direct, fout = [], [], []
            for a, b in _chunks(lo, hi, k):
                j0 = bisect_left(tg, a, i0, i1)
                j1 = bisect_left(tg, b, j0, i1)
                if j0 == j1:
                    continue
                p = procs[a]
                self.procs.add(p)
                here = []
                if tg[j0] == a:                  # rank a is a target: under each hop
                    for f in up:
                        self.below[f].append(p)
                    here.append((local[j0], addrs[a]))
                    j0 += 1
                if b == a + 1:
                    # A leaf of the fixed tree (whatever the slice): the hop above
                    # delivers to its actor, and its proc's I/O thread is not woken.
                    direct.extend(here)
                    continue
                self.below.setdefault(p, [])
                self.rank_of[p] = a
                count = j1 - j0 + len(here)
                children, leaves, fchildren = (build(a + 1, b, j0, j1, up + (p,))
                                               if j0 < j1 else ([], [], []))
                here.extend(leaves)
                out.append((p, count, _dumps((here, children), 5)))
                if fan:
                    fout.append((p, _fo.pack_route(here, fchildren)))
            return out, direct, fout

        self.heads, self.direct, fout = build(0, len(addrs), 0, len(tg), ())
        self.fan = fout if fan else None
        self.below = {p: tuple(v) for p, v in self.below.items() if v}


def route_around(plan: Plan, lost, addrs, procs, granks, k: int) -> Plan:
    """``plan`` (of the call ranks ``granks``) without the ranks on the dead procs
    ``lost`` and those whose route went through them, which the caller fails itself.
    The tree is the same, so no dead proc is on the route: no forwarder waits for an
    answer from below that cannot come (its relay would be held until it exits)."""
    gone = set(lost)
    for p in lost:
        gone.update(plan.below.get(p, ()))
    skip = {g for g in granks if procs[g] in gone}
    return Plan(addrs, procs, granks, k, skip, plan.fan is not None)


def use_tree(node, n: int) -> bool:
    """Whether a message from this node to ``n`` procs or actors goes down a tree:
    only the controller sends down trees, to more than the fan-out."""
    k = fanout()
    return node.is_controller and bool(k) and n > k


def send_down(node, plan: Plan, f0: bytes, extras=(), leaf=None) -> None:
    """THE sender's side of every message down a tree (casts, spawns, stops,
    heartbeats): ``f0`` with each head's route (then ``extras``) to the heads of
    ``plan``, skipping procs known dead (the sender fails or retries what lies
    behind them); then, for each one-rank chunk the sender delivers to itself,
    ``leaf(local, target) -> (destination, frames)`` is sent."""
    for proc, _, hop in plan.heads:
        if proc_failure(node, proc) is None:
            node.send(proc, [f0, hop, *extras])
    if leaf is not None:
        for local, target in plan.direct:
            node.send(*leaf(local, target))


def route(frames) -> tuple:
    """A forwarder's part of a message down a tree: ``(here, children)``; ``here``:
    ``[(local, target)]`` it delivers to, ``children``: ``[(proc, count, route)]``
    it passes the message on to (:func:`pass_on`)."""
    return pickle.loads(buf(frames[0]))


def pass_on(node, children, f0: bytes, extras=(), what: str | None = None) -> None:
    """In a forwarder's pump: send ``f0`` with each child's route (then ``extras``) to
    the heads below this proc.  A child that cannot be reached does not stop the rest;
    it is logged naming ``what`` (None: not logged, the sender's next step covers it)."""
    for proc, _, route in children:
        try:
            node.send(proc, [f0, route, *extras])
        except Exception as e:  # noqa: BLE001 - the rest goes on
            if what is not None:
                from monarch_cy._log import logger  # deferred: import time (logging)
                logger("actor").error("cannot pass %s on to proc %s: %s", what, proc, e)


# What forwarders do with the replies of a cast: nothing (they go to the sender
# directly), pass them up per turn of the pump (``stream``: wanted as they come),
# fold them (``Accumulator`` with ``merge=``), or pass up each subtree's replies in one
# batch once all of it answered (``call``, ``Accumulator``: nothing is done with a
# value before the last one is in).
NO_RELAY, RELAY, REDUCE, GATHER = 0, 1, 2, 3


def send_tree(node, plan: Plan, name, reply_addr, port_id, key, ext, data, extras,
              mode: int = NO_RELAY, reduce: bytes | None = None) -> None:
    """Send a call down ``plan``: one CAST per head (a dead head is skipped; the
    caller fails its subtree).  ``mode``: what the forwarders do with the replies
    (above; any but ``NO_RELAY`` only where each rank answers exactly once, not an
    explicit-port endpoint); ``REDUCE`` folds with ``reduce``
    (:func:`.reduce.reduce_spec`)."""
    if (mode == REDUCE) != (reduce is not None):
        raise ValueError(f"send_tree: mode={mode!r} with reduce="
                         f"{'None' if reduce is None else 'a fold'}: REDUCE needs a fold "
                         "and no other mode takes one")
    if plan.fan is not None:
        return _send_fan(node, plan, name, reply_addr, port_id, key, ext, data, extras,
                         mode)
    f0 = pack((CAST, name, reply_addr, port_id, key, ext, mode), data)
    send_down(node, plan, f0, [*([reduce] if mode == REDUCE else ()), *extras],
              lambda local, addr: (addr, [pack_call(name, reply_addr, port_id, local, key,
                                                    ext, data), *extras]))


# What the nogil forwarders do for each mode: gather whole (a fold is the
# controller's then, Monarch's semantics), per turn of their loop, or nothing.
_FAN_MODE = {NO_RELAY: _fo.NONE, GATHER: _fo.WHOLE, REDUCE: _fo.WHOLE,
             RELAY: _fo.PER_TURN}


def _send_fan(node, plan: Plan, name, reply_addr, port_id, key, ext, data, extras,
              mode: int) -> None:
    """:func:`send_tree` down the heads' nogil forwarders: the call header is pickled
    once, with a slot for each actor's rank and the reply address marked for the
    forwarders to put their own in; they gather the replies in C (``mode`` as for the
    Python relays, but a ``REDUCE`` is gathered and folded here), so no proc's
    interpreter is on the way of another's call or reply.  A dead head is skipped
    (the caller fails its subtree)."""
    tpl, off, span = _fo.call_template(name, reply_addr, port_id, key, ext)
    fmode = _FAN_MODE[mode]
    for proc, route in plan.fan:
        if proc_failure(node, proc) is None:
            node.send(_fo.addr_of(proc), [_fo.pack_message(tpl, off, route, data, fmode,
                                                           port_id, reply_addr, span),
                                          *extras])
    for local, addr in plan.direct:
        node.send(addr, [pack_call(name, reply_addr, port_id, local, key, ext, data),
                         *extras])


def pass_undeliverable(node, hdr, data, extras) -> None:
    """UNDELIVERABLE at a forwarder (a call reached an actor below that had already
    failed or stopped): up to whoever the relay of that port answers, ahead of the
    error reply it will pass on.  A port that is no relay (an actor's own call) is
    the caller's business: nothing to do."""
    relay = node.relay(hdr[1])
    if relay is not None:
        node.send(relay.addr, [pack((hdr[0], relay.port, *hdr[2:]))])


class Relay:
    """A forwarder's port for the replies of its subtree (``RELAY`` and ``GATHER``
    casts), so that the sender receives about one message per head instead of one per
    actor.  ``RELAY``: each reply goes up in a ``REPLY_BATCH`` with whatever else
    arrived in the same turn of the pump.  ``GATHER``: the subtree's replies go up in
    one ``REPLY_BATCH`` once every rank below answered (no timer, nothing held past
    the last reply the sender waits for anyway), an error at once and alone (the call
    fails with the first; later replies of a failed call are dropped here).  Either
    way a reply that carries large buffers goes up alone, untouched.  Dropped once
    every rank below has answered; one whose subtree lost a proc stays until the proc
    exits (the controller fails those ranks itself)."""

    __slots__ = ("node", "addr", "port", "left", "buf", "pid", "queued", "whole",
                 "failed")

    def __init__(self, node, addr, port, left, whole: bool = False) -> None:
        """Opens its relay port on ``node`` (``pid``); closed once ``left`` replies
        came (or by the opener)."""
        self.node, self.addr, self.port, self.left = node, addr, port, left
        self.pid = node.open_relay(self)
        self.buf = []
        self.queued = False
        self.whole = whole
        self.failed = False

    def take(self, rank, ok, data, extras) -> None:
        self.left -= 1
        if self.failed:
            pass                                 # the call failed: the rest is dropped
        elif extras or (self.whole and not ok):  # up alone, at once
            self.failed = self.whole and not ok
            self.node.send(self.addr, [pack((REPLY, self.port, rank, ok), data),
                                       *[buf(f) for f in extras]])
        else:
            self.buf.append((rank, ok, bytes(data)))
        self._soon()

    def take_batch(self, items) -> None:
        self.left -= len(items)
        if not self.failed:
            self.buf.extend(items)
        self._soon()

    def take_partial(self, ranks, data, extras) -> None:
        """A fold from below (a forwarder that could fold when this one could not)."""
        self.left -= len(ranks)
        if not self.failed:
            self.node.send(self.addr, [pack((REPLY_PARTIAL, self.port, ranks), data),
                                       *[buf(f) for f in extras]])
        self._soon()

    def _soon(self) -> None:
        if self.whole:
            if self.left <= 0:
                self.flush()
        elif not self.queued:
            self.queued = True
            self.node.after_turn(self.flush)     # after this turn's messages

    def flush(self) -> None:
        self.queued = False
        if self.buf and not self.failed:
            items, self.buf = self.buf, []
            self.node.send(self.addr, [pack((REPLY_BATCH, self.port), _dumps(items, 5))])
        if self.left <= 0:
            self.node.close_relay(self.pid)


def forward(node, hdr, data, frames) -> None:
    """CAST handler, in a proc's pump: forward to the heads below, then deliver to
    this proc's own actor (its messages keep their order: one pump, one connection
    per destination).  A child that cannot be reached is logged; the controller
    fails what waited on it when it learns the proc died."""
    _, method, raddr, port_id, key, ext, mode = hdr[:7]
    here, children = route(frames)
    spec = [buf(frames[1])] if mode == REDUCE else []
    extras = [buf(f) for f in frames[1 + len(spec):]]
    if mode:         # replies from here and below come to us, and go up in batches
        left = len(here) + sum(c for _, c, _ in children)
        relay = None
        if mode == REDUCE:
            try:
                relay = ReduceRelay(node, raddr, port_id, key, left, method, spec[0])
            except Exception as e:  # noqa: BLE001 - not here: the controller folds
                from monarch_cy._log import logger  # deferred: import time (logging)
                logger("actor").warning("cannot fold replies of %s here (%s: %s); "
                                        "passing them up", method, type(e).__name__, e)
        if relay is None:
            relay = Relay(node, raddr, port_id, left, mode == GATHER)
        raddr, port_id = node.addr, relay.pid
        hdr = (CAST, method, raddr, port_id, key, ext, mode)
    if children:
        pass_on(node, children, pack(hdr, data), [*spec, *extras], f"a call of {method}")
    for local, addr in here:
        node.send(addr, [pack_call(method, raddr, port_id, local, key, ext, data),
                         *extras])

