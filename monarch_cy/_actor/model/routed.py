"""A controller's call to a mesh it casts to down a tree: which path it takes, and
sending it there (the tree itself: :mod:`monarch_cy._actor.cast.tree`; the path
rules: :mod:`monarch_cy._actor.cast.router`).

:class:`RoutedSend` is a part of :class:`~.endpoint.Endpoint`: ``Endpoint._send``
calls :meth:`RoutedSend._send_routed` for every call from the controller to a mesh
that has a router (a mesh larger than the fan-out, or one already cast to down its
tree).  Non-blocking; raises what the direct path raises (``TypeError`` for
arguments that cannot be encoded, naming the endpoint).
"""

from __future__ import annotations

import pickle

from monarch_cy._errors import MessageTooLargeError
from monarch_cy._actor.base.client_faults import note_seen
from monarch_cy._actor.base.state import dead_among, proc_failure
from monarch_cy._actor.cast import router as cast_router, tree as cast_tree
from monarch_cy._transport.protocol import pack_call

__all__ = ["RoutedSend", "REROUTED", "unsendable"]


def unsendable(label: str, e: TypeError) -> BaseException:
    """What a caller gets when the arguments of endpoint ``label`` cannot be pickled.

    ``e`` is the serializer's ``TypeError`` (``cannot pickle object of type ...``).
    When the object's own pickling code raised (a ``__getstate__``/``__reduce__`` that
    raises ``RuntimeError``, say), that exception itself is raised, as Monarch's
    callers see it, with a note naming the endpoint; an object that cannot be pickled
    at all gives a ``TypeError`` naming the endpoint and the object.
    """
    cause = e.__cause__
    if cause is not None and not isinstance(
            cause, (TypeError, RecursionError, pickle.PicklingError)):
        cause.add_note(f"(raised while pickling the arguments of endpoint {label})")
        cause.__suppress_context__ = True
        return cause
    err = TypeError(f"arguments of endpoint {label} cannot be sent: {e}")
    err.__cause__ = cause
    return err



class RoutedSend:
    """The tree path of :class:`~.endpoint.Endpoint` (its ``_mesh``, ``_name``,
    ``_explicit``, ``_timeout``, ``_send_direct`` and ``_arm``)."""

    __slots__ = ()

    def _send_routed(self, node, router, big, granks, procs, collector, args, kwargs,
                     want_reply, direct, reply_to, ext, reduce):
        """A call to a mesh the controller has cast to down a tree: down the tree, or
        directly when that cannot reorder it (see the router); ``reduce``: the
        forwarders fold the replies (:mod:`monarch_cy._actor.cast.reduce`)."""
        mesh = self._mesh
        confirmable = want_reply and reply_to is None
        path, cid = router.start(cast_router.TREE if big else cast_router.DIRECT,
                                 confirmable)
        plan = None
        if path == cast_router.TREE:
            plan = mesh._plan if big else None
            if plan is None:
                plan = cast_tree.Plan(mesh._addrs, mesh._procs, granks, router.k, fan=True)
                if big:
                    mesh._plan = plan
        if confirmable:
            collector = cast_router.Tracked(collector, router, path, cid, len(granks),
                                            len(granks) == len(mesh._addrs),
                                            plan.below if plan is not None else None,
                                            plan.rank_of if plan is not None else None)
        if plan is None:
            try:
                return self._send_direct(node, granks, procs, collector, args, kwargs,
                                         want_reply, direct, reply_to, ext)
            except (TypeError, MessageTooLargeError):  # never sent, holds nothing up
                if confirmable:
                    collector.unsent()
                raise
            except BaseException:      # perhaps sent to some: never confirmed
                if confirmable:
                    collector.abandoned()
                raise
        try:
            data, extras = node.encode((args, kwargs), procs)
        except MessageTooLargeError:
            if confirmable:
                collector.unsent()
            raise
        except TypeError as e:
            if confirmable:
                collector.unsent()
            raise unsendable(f"{mesh._name}.{self._name}", e)
        port_id = node.register_port(collector) if want_reply else 0
        key = node.key
        # The direct inbox is read while a caller waits on a reply; what comes back for a
        # call that wants none (a failed actor's undeliverable notice) goes to the pump's.
        addr = node.direct_addr if direct and want_reply else node.addr
        if reply_to is not None:
            addr, port_id, key = reply_to._addr, reply_to._port_id, reply_to._key
        if confirmable and self._name in REROUTED:
            collector.resend = _resender(node, mesh, granks, self._name, addr, port_id,
                                         key, ext, data, extras)
        lost = dead_among(node, plan.procs)     # proc key -> cause, read once
        route = cast_tree.route_around(plan, lost, mesh._addrs, mesh._procs, granks,
                                       router.k) if lost else plan
        try:
            cast_tree.send_tree(node, route, self._name, addr, port_id, key, ext, data,
                                extras, _relay_mode(confirmable and not self._explicit,
                                                    collector, reduce), reduce)
            if lost:       # a proc on the route is dead: what lies behind it fails now
                for p, cause in lost.items():
                    note_seen(p)            # the program is told of the failure
                    if want_reply and reply_to is None and \
                            collector.proc_failed(p, cause):
                        node.drop_port(port_id)
                        break
                if not want_reply:
                    from monarch_cy._log import logger  # deferred: import time (logging)
                    logger("actor").warning(
                        "%s.%s: not delivered behind dead proc(s) %s (respawn them)",
                        mesh._name, self._name, ", ".join(map(str, lost)))
                node.wake_direct()
        except BaseException:
            if port_id and reply_to is None:
                node.drop_port(port_id)
            if confirmable:
                collector.abandoned()       # perhaps sent to some heads
            raise
        if want_reply and self._timeout is not None:
            self._arm(node, port_id, getattr(collector, "futs", None) or [collector.fut])
        return port_id


#: Messages routed around a dead forwarder instead of failing behind it: harmless
#: twice, and due to every live actor (a stop must run each one's ``__cleanup__``).
REROUTED = frozenset({"__stop_mesh__"})


def _resender(node, mesh, granks, name, addr, port_id, key, ext, data, extras):
    """``resend(proc keys, answered call ranks)`` for :class:`~.cast.router.Tracked`:
    the call, directly to each rank on those procs that did not answer yet and whose
    proc is not known dead (the route through a dead forwarder is gone)."""
    def resend(procs, answered) -> None:
        wanted = set(procs)
        for local, g in enumerate(granks):
            p = mesh._procs[g]
            if p in wanted and local not in answered and proc_failure(node, p) is None:
                try:
                    node.send(mesh._addrs[g], [pack_call(name, addr, port_id, local, key,
                                                         ext, data), *extras])
                except Exception:  # noqa: BLE001 - its proc's failure ends the call
                    pass
    return resend


def _relay_mode(relay: bool, collector, reduce) -> int:
    """What the forwarders do with the replies (:data:`monarch_cy._actor.cast.tree.GATHER` and the
    rest): gathered per subtree unless the collector takes each reply as it comes."""
    if not relay:
        return cast_tree.NO_RELAY
    if reduce is not None:
        return cast_tree.REDUCE
    return cast_tree.RELAY if collector.streaming else cast_tree.GATHER
