"""Which path each controller call to a cast-tree mesh takes, and what it proves.

Per-sender FIFO.  Every hop of the tree (:mod:`.tree`) keeps order (one pump
per proc, one connection per destination), and the path to a rank is always the
same, so tree messages reach each actor in the order sent.  A message sent
*directly* (a ``call_one``, a small slice, ``__stop__``) takes another path and could
overtake a tree message still on its way, or be overtaken by one.  :class:`Router`
rules that out: a message takes its preferred path only when every earlier message
on the other path is known to have been handled by its actors (each actor answered
it); otherwise it takes the same path as those earlier messages.  A message whose
handling is never confirmed (``broadcast``, a timed-out call, a call that failed
part-way) keeps its path *open* until a later call on that same path to the whole
mesh is answered by every actor (FIFO on the path then proves the earlier one was
handled).  So ``call`` then ``call_one`` costs nothing extra, and ``broadcast`` then
``call_one`` sends the ``call_one`` down the tree (a hop per level) rather than risk
reordering.

:class:`Tracked` wraps a call's collector to tell the router when the call ended, and
fails the ranks below a forwarder that died.  A whole-mesh call that every actor
answered also counts as a heartbeat from each of its procs (:mod:`.heartbeat`).
:func:`stop_down_trees` is ``ProcMesh.stop``'s use of the same knowledge.
"""

from __future__ import annotations

import threading
import time

from monarch_cy._actor.base import state as _state
from monarch_cy._actor.cast.tree import Plan, fanout, send_tree
from monarch_cy._transport.ports import BaseCollector

__all__ = ["Router", "Tracked", "router_for", "stop_down_trees", "ROUTERS", "TREE",
           "DIRECT"]

TREE, DIRECT = 0, 1
ROUTERS: dict = {}        # first actor address of a mesh -> its Router (controller only)
_ALIVE_EVERY_S = 0.25     # how often answered calls may count as heartbeats


class Router:
    """Which path each call from this controller to one actor mesh takes (see the
    module docstring).  Thread-safe; the pump ends calls, callers start them."""

    __slots__ = ("addrs", "procs", "k", "open", "held", "ids", "lock", "_full",
                 "_alive_at")

    def __init__(self, addrs, procs, k: int) -> None:
        self.addrs, self.procs, self.k = addrs, procs, k
        self.open = [0, 0]          # calls in flight per path, not yet all answered
        self.held = [0, 0]          # newest unconfirmed call id per path (0: none)
        self.ids = 0
        self.lock = threading.Lock()
        self._full = None
        self._alive_at = 0.0

    def start(self, prefer: int, reply: bool):
        """Pick the path of a new call and count it: ``(path, call id)``."""
        with self.lock:
            other = 1 - prefer
            path = prefer if not (self.open[other] or self.held[other]) else other
            self.ids += 1
            if reply:
                self.open[path] += 1
            else:
                self.held[path] = self.ids
            return path, self.ids

    def end(self, path: int, cid: int, confirmed: bool, full: bool) -> None:
        """A call ended: every actor answered it (``confirmed``), or not."""
        with self.lock:
            self.open[path] -= 1
            if not confirmed:
                self.held[path] = max(self.held[path], cid)
            elif full and self.held[path] and self.held[path] < cid:
                self.held[path] = 0
        if confirmed and full:
            self._alive()

    def _alive(self) -> None:
        # Every proc of the mesh answered: as good as a heartbeat from each (their
        # interpreters run), so the heartbeat tick skips them for a while
        # (monarch_cy._actor.heartbeat); at most a few times a second.
        now = time.monotonic()
        if now - self._alive_at < _ALIVE_EVERY_S:
            return
        self._alive_at = now
        for key in set(self.procs):
            p = _state.LIVE_PROCS.get(key)
            if p is not None:
                p.last_seen = now

    def tree_in_use(self) -> bool:
        with self.lock:
            return bool(self.open[TREE] or self.held[TREE])

    def full_plan(self) -> Plan:
        if self._full is None:
            self._full = Plan(self.addrs, self.procs, range(len(self.addrs)), self.k,
                              fan=True)
        return self._full


def router_for(mesh) -> Router:
    """The controller's router of ``mesh``'s base mesh (slices share it)."""
    key = mesh._addrs[0]
    r = ROUTERS.get(key)
    if r is None or r.addrs is not mesh._addrs and r.addrs != mesh._addrs:
        r = ROUTERS[key] = Router(mesh._addrs, mesh._procs, fanout())
    return r


class Tracked(BaseCollector):
    """A call's collector, watched for the router: tells it when the call ended and
    whether every actor answered; fails the ranks below a forwarder that died."""

    __slots__ = ("inner", "router", "path", "cid", "full", "left", "got", "below",
                 "ended", "fut", "futs", "rank_of", "resend")

    def __init__(self, inner, router, path, cid, n, full, below, rank_of=None,
                 resend=None) -> None:
        """``below``, ``rank_of``: the route's (:class:`~.tree.Plan`); ``resend(
        proc keys, answered call ranks)``: sends the call directly to the ranks on
        those procs (None: a call whose route crossed a dead forwarder fails there)."""
        self.inner, self.router, self.path, self.cid = inner, router, path, cid
        self.full, self.left, self.got, self.below = full, n, set(), below
        self.rank_of, self.resend = rank_of or {}, resend
        self.ended = False
        self.fut = getattr(inner, "fut", None)       # the inner collector's future(s)
        self.futs = getattr(inner, "futs", None)

    @property
    def actor(self) -> str:
        return self.inner.actor

    @property
    def rank(self):
        return self.inner.rank

    @property
    def adverb(self):
        return getattr(self.inner, "adverb", None)

    @property
    def streaming(self) -> bool:
        return self.inner.streaming

    def _end(self, unsent: bool = False) -> None:
        if not self.ended:
            self.ended = True
            self.router.end(self.path, self.cid, unsent or self.left == 0,
                            self.full and not unsent)

    def deliver(self, rank, ok, value) -> bool:
        if rank not in self.got:
            self.got.add(rank)
            self.left -= 1
        done = self.inner.deliver(rank, ok, value)
        if done:
            self._end()
        return done

    def deliver_batch(self, items) -> tuple[int, bool]:
        """As the inner collector's ``deliver_batch`` (``(taken, done)``), counted."""
        took, done = self.inner.deliver_batch(items)
        got = self.got
        n = len(got)
        got.update([r for r, _, _ in items[:took]])
        self.left -= len(got) - n
        if done:
            self._end()
        return took, done

    def deliver_partial(self, ranks, value) -> bool:
        for r in ranks:
            if r not in self.got:
                self.got.add(r)
                self.left -= 1
        done = self.inner.deliver_partial(ranks, value)
        if done:
            self._end()
        return done

    def proc_failed(self, proc, cause) -> bool:
        """``proc`` failed: the ranks on it fail (with ``resend``, a stop: they count
        as stopped); those whose route went through it are sent the call directly
        (``resend``) or fail with a SupervisionError whose
        ``rank`` is the forwarder's: the rank to respawn (``procs.respawn([e.rank])``
        heals the route; their own procs are healthy)."""
        under = self.below.get(proc) if self.below else None
        if self.resend is not None:      # a stop: what died is stopped; go around it
            if under:
                self.resend(under, self.got)
            done = False
            for r, p in enumerate(getattr(self.inner, "procs", ())):
                if p == proc and r not in self.got:
                    done = self.deliver(r, True, None) or done
            return done
        done = self.inner.proc_failed(proc, cause)
        if under and not done:
            rank = self.rank_of.get(proc)
            why = (f"the call's route went through rank {rank} (proc {proc}), which "
                   f"failed ({cause}); it may or may not have reached the actors below "
                   f"it, whose procs live: respawn rank {rank} to reach them again")
            for q in under:
                if self.inner.proc_failed(q, why, failed_rank=rank):
                    done = True
                    break
        if done:
            self._end()
        return done

    def abandoned(self) -> None:
        """The port was dropped (per-call timeout): never confirmed."""
        self._end()

    def unsent(self) -> None:
        """The call never left (its arguments could not be encoded): it holds nothing
        up."""
        self._end(unsent=True)


def stop_down_trees(node, records) -> tuple:
    """``ProcMesh.stop``: ``__stop__`` to the actors of each mesh whose calls may still
    be on their way down its tree, down that tree (so it arrives after them).  Returns
    ``(reached, idle, below)``: the actor addresses so reached, those of meshes with no
    call of this controller in flight on any path (each proc may stop those itself),
    and the ``below`` map of each tree used (forwarder proc key -> the proc keys its
    ``__stop__`` passed through it: a forwarder that dies leaves them to the caller).
    The caller posts ``__stop__`` directly to the rest, and each proc's STOP waits for
    its actors while its pump keeps forwarding."""
    done, idle, below = set(), set(), []
    for rec in records:
        if not rec.where:
            continue
        first = next((a for a, r in rec.where.values() if r == 0), None)
        router = ROUTERS.pop(first, None)
        if router is None:
            continue
        if not router.tree_in_use():
            with router.lock:
                if not (router.open[DIRECT] or router.held[DIRECT]):
                    idle.update(router.addrs)
            continue
        plan = router.full_plan()
        if _state.dead_among(node, plan.procs):
            continue                  # a broken tree: straight to each actor instead
        data, extras = node.encode(((), {}), (node.key,))
        send_tree(node, plan, "__stop__", "", 0, node.key, None, data, extras)
        done.update(router.addrs)
        below.append(plan.below)
    return done, idle, below
