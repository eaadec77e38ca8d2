"""``@endpoint`` and the adverbs used to call an endpoint on an actor mesh.

Adverbs (all send at once; none blocks except ``Future.get``):

* ``call(*a, **kw)``      -> ``Future[ValueMesh]``, one value per actor; the first
  actor error fails the future with :class:`ActorError`.
* ``call_one(*a, **kw)``  -> ``Future[R]``; the mesh must have exactly one actor.
* ``choose(*a, **kw)``    -> ``Future[R]`` from one actor (round robin).
* ``broadcast(*a, **kw)`` -> None; fire and forget (errors are logged by the actor).
* ``stream(*a, **kw)``    -> iterator of ``Future[R]`` in *arrival* order.
* ``Accumulator(ep, identity, combine).accumulate(*a, **kw)`` -> ``Future``:
  ``combine`` folds the replies in arrival order, starting from ``identity``; with
  ``merge=`` large meshes fold on the way back (:mod:`monarch_cy._actor.cast.reduce`).

Per-call timeouts: ``mesh.ep.with_timeout(s).call(...)`` (any adverb with a reply):
a call not answered within ``s`` seconds fails with ``TimeoutError`` and its state
(the reply port) is dropped at once; a late reply is discarded.

Arguments are pickled once at the call site (an unpicklable argument raises
``TypeError`` there) and the same bytes go to every actor of the mesh.
"""

from __future__ import annotations

import pickle
from typing import (TYPE_CHECKING, Any, Callable, Concatenate, Coroutine, Generic,
                    Iterator, ParamSpec, TypeVar, overload)

from monarch_cy._checks import check_timeout
from monarch_cy._errors import MeshStoppedError, MessageTooLargeError, SupervisionError
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.client_faults import note_seen as _seen
from monarch_cy._actor.base.failure import owner_lost
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.cast import reduce as tree_reduce, router as cast_router, \
    tree as cast_tree
from monarch_cy._actor.model.ports import (AccumCollector, ChooseCollector, GatherCollector,
                                           OneCollector, Port, ReduceCollector,
                                           StreamCollector)
from monarch_cy._actor.model.routed import RoutedSend, unsendable
from monarch_cy._transport.current import current_node
from monarch_cy._transport.protocol import pack_call

__all__ = ["endpoint", "EndpointProperty", "Endpoint", "Accumulator", "send", "NotAnEndpoint",
           "as_endpoint", "EXPLICIT_PLAIN"]

R = TypeVar("R")
A = TypeVar("A")
P = ParamSpec("P")
if TYPE_CHECKING:
    from monarch_cy._actor.base.value_mesh import ValueMesh


_make = Future._make
_proc_failure = _state.proc_failure
_LOCAL = _state.local
_get_node = _state.get_node


def _check_self(mesh, granks, collector) -> None:
    """Mark the futures of a call a sync actor makes to itself: waiting on them
    would deadlock, so ``get()`` raises instead (``await`` in async actors is fine)."""
    inst = getattr(_LOCAL, "instance", None)
    if inst is None or not inst.sync:
        return
    addrs = mesh._addrs
    if any(addrs[g] == inst.addr for g in granks):
        futs = getattr(collector, "futs", None) or [collector.fut]
        for f in futs:
            f._self_wait = f"{inst.actor_id} calling {mesh._name}"


def _owner_lost(node, mesh, rank=None):
    """The ``SupervisionError`` of a call on ``mesh`` once the actor that spawned it
    is known to have died with its process (its actors stop then:
    :mod:`monarch_cy._actor.host.child_failures`), else None."""
    proc, who, name = mesh._owner_at
    cause = _proc_failure(node, proc)
    if cause is None:
        return None
    return SupervisionError(mesh._name, rank, owner_lost(who, name, cause), who=who)


class EndpointProperty(Generic[P, R]):
    """What ``@endpoint`` puts on an Actor class: the function plus its flags.

    Inside the actor, ``self.method(...)`` is a plain local call.  For a type
    checker, ``mesh.method`` (``mesh`` typed as the actor class, as
    ``procs.spawn("n", Cls)`` returns it) is an :class:`Endpoint` with the method's
    parameters and result type, so ``mesh.method.call_one(1)`` is checked.
    """

    def __init__(self, fn: Callable[..., Any], explicit_response_port: bool = False) -> None:
        if not callable(fn):
            raise TypeError(f"@endpoint decorates a function, not {fn!r}")
        self._fn = fn
        self._explicit = bool(explicit_response_port)
        self._concurrent = False      # @concurrent_endpoint: not queued behind others
        self._is_async = bool(getattr(getattr(fn, "__code__", None), "co_flags", 0) & 0x80)
        self._name = getattr(fn, "__name__", "endpoint")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __set_name__(self, owner, name):
        self._name = name

    @property
    def _explicit_response_port(self) -> bool:
        """Monarch's flag: whether the endpoint answers through a response port rather
        than by returning at dispatch -- ``explicit_response_port=True``, and every
        ``@concurrent_endpoint`` (its body runs as a task that answers when done)."""
        return self._explicit or self._concurrent

    @overload
    def __get__(self, obj: None, objtype: Any = None) -> "EndpointProperty[P, R]": ...

    @overload
    def __get__(self, obj: object, objtype: Any = None) -> "Endpoint[P, R]": ...

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return self._fn.__get__(obj, objtype)


@overload
def endpoint(fn: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]
             ) -> EndpointProperty[P, R]: ...


@overload
def endpoint(fn: Callable[Concatenate[Any, P], R]) -> EndpointProperty[P, R]: ...


@overload
def endpoint(*, explicit_response_port: bool = ..., **options: Any
             ) -> Callable[[Callable[..., Any]], EndpointProperty[..., Any]]: ...


def endpoint(fn=None, *, explicit_response_port: bool = False, **_options):
    """Mark an Actor method (``def`` or ``async def``) as remotely callable.

    With ``explicit_response_port=True`` the method receives a :class:`Port` as its
    first argument after ``self`` and answers by ``port.send(value)`` (any number of
    times for ``stream``-like uses, once for ``call``/``call_one``).
    """
    if fn is None:
        return lambda f: EndpointProperty(f, explicit_response_port)
    return EndpointProperty(fn, explicit_response_port)


class Endpoint(RoutedSend, Generic[P, R]):
    """An endpoint of an actor mesh (``mesh.method``), with the adverbs."""

    __slots__ = ("_mesh", "_name", "_explicit", "_timeout")

    def __init__(self, mesh, name: str, explicit: bool, timeout=None) -> None:
        self._mesh, self._name, self._explicit = mesh, name, explicit
        self._timeout = timeout

    def with_timeout(self, seconds: float) -> "Endpoint[P, R]":
        """This endpoint with a per-call timeout (see the module docstring)."""
        return Endpoint(self._mesh, self._name, self._explicit,
                        check_timeout("timeout", seconds))

    def _arm(self, node, port_id, futs) -> None:
        """Fail ``futs`` with TimeoutError and drop the port after the timeout."""
        timeout, where = self._timeout, f"{self._mesh._name}.{self._name}"

        def expire():
            col = node.port(port_id)
            if col is None:
                return
            node.drop_port(port_id)
            if col.__class__ is cast_router.Tracked:
                col.abandoned()
            for f in futs:
                f._set_exception(TimeoutError(
                    f"call to {where} not answered within {timeout:g} s (per-call "
                    "timeout; the call was abandoned)"))
            node.wake_direct()
        node.add_timer(timeout, expire)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        raise TypeError(f"call an endpoint through an adverb: "
                        f"{self._name}.call(...), .call_one(...), .choose(...), "
                        f".broadcast(...) or .stream(...)")

    # -- sending -----------------------------------------------------------
    def _prepare(self, granks):
        mesh = self._mesh
        node = current_node()
        if node is None:
            node = _get_node()
        st = mesh._state
        if st is not None and st.stopped:
            raise MeshStoppedError(mesh._name, None, "stopped by client",
                                   f"{mesh._name}.{self._name}()",
                                   mesh._who(granks[0]) if granks else None)
        procs = [mesh._procs[g] for g in granks]
        return node, procs, True

    def _send(self, node, granks, procs, collector, args, kwargs, want_reply=True,
              direct=True, reply_to=None, ext=False, reduce=None):
        try:
            return self._send_any(node, granks, procs, collector, args, kwargs,
                                  want_reply, direct, reply_to, ext, reduce)
        except MessageTooLargeError as e:      # nothing sent: the call fails, as Monarch's
            if collector is None:
                raise
            for p in (procs if collector.streaming else procs[:1]):
                collector.proc_failed(p, _oversize(self._mesh, self._name, e))
            return 0

    def _send_any(self, node, granks, procs, collector, args, kwargs, want_reply, direct,
                  reply_to, ext, reduce):
        mesh = self._mesh
        if mesh._owner_at is not None:
            lost = _owner_lost(node, mesh)
            if lost is not None:        # every rank fails with it; nothing is sent
                if want_reply and collector is not None:
                    for local in range(len(granks)):
                        if collector.deliver(local, False, lost):
                            break
                return 0
        if want_reply:
            _check_self(mesh, granks, collector)
        if node.is_controller:
            k = cast_tree.fanout()
            big = k and len(granks) > k
            if big or cast_router.ROUTERS:
                router = cast_router.router_for(mesh) if big else \
                    cast_router.ROUTERS.get(mesh._addrs[0])
                if router is not None:
                    return self._send_routed(node, router, big, granks, procs, collector,
                                             args, kwargs, want_reply, direct, reply_to,
                                             mesh._ext if ext is False else ext, reduce)
        return self._send_direct(node, granks, procs, collector, args, kwargs, want_reply,
                                 direct, reply_to, mesh._ext if ext is False else ext)

    def _send_direct(self, node, granks, procs, collector, args, kwargs, want_reply,
                     direct, reply_to, ext):
        mesh = self._mesh
        try:
            data, extras = node.encode((args, kwargs), procs)
        except TypeError as e:
            raise unsendable(f"{mesh._name}.{self._name}", e)
        port_id = node.register_port(collector) if want_reply else 0
        name, key = self._name, node.key
        # The direct inbox is read while a caller waits on a reply; what comes back for a
        # call that wants none (a failed actor's undeliverable notice) goes to the pump's.
        addr = node.direct_addr if direct and want_reply else node.addr
        if reply_to is not None:       # send(..., port=): replies go to the user's port
            addr, port_id, key = reply_to._addr, reply_to._port_id, reply_to._key
        addrs = mesh._addrs
        send = node.send
        try:
            for local, g in enumerate(granks):
                p = procs[local]
                cause = _proc_failure(node, p)
                if cause is not None:
                    _seen(p)
                    if want_reply and collector.proc_failed(p, cause):
                        node.drop_port(port_id)
                    continue
                send(addrs[g], [pack_call(name, addr, port_id, local, key, ext, data),
                                *extras])
            late = _state.dead_among(node, procs)
            if late:          # a proc failed while we sent: its part must not hang
                for local, g in enumerate(granks):
                    if procs[local] in late:
                        _late_dead(node, port_id, collector if want_reply else None,
                                   procs[local], addrs[g])
        except BaseException:  # e.g. MemoryError (no room): what it holds is released
            if port_id and reply_to is None:
                node.drop_port(port_id)
            raise
        if want_reply and self._timeout is not None:
            self._arm(node, port_id, getattr(collector, "futs", None) or [collector.fut])
        return port_id

    def call(self, *args: P.args, **kwargs: P.kwargs) -> "Future[ValueMesh[R]]":
        mesh = self._mesh
        granks = mesh._granks()
        node, procs, direct = self._prepare(granks)
        fut = Future._make(node if direct else None)
        col = GatherCollector(fut, mesh._shape.extent, procs, mesh._name,
                              f"{mesh._name}.{self._name}()", mesh._who_local)
        self._send(node, granks, procs, col, args, kwargs, direct=direct)
        return fut

    def call_one(self, *args: P.args, **kwargs: P.kwargs) -> "Future[R]":
        mesh = self._mesh
        granks = mesh._granks()
        if len(granks) != 1:
            raise ValueError(f"call_one needs a mesh of exactly one actor; "
                             f"{mesh._name} has {len(granks)} (slice it first)")
        return self._one(granks[0], args, kwargs, mesh._ext)

    def _one(self, g, args, kwargs, ext=None, collector=OneCollector) -> Future:
        # The hot path of call_one/choose: _prepare and _check_self inlined.
        mesh = self._mesh
        node = current_node()
        if node is None:
            node = _get_node()
        st = mesh._state
        if st is not None and st.stopped:
            raise MeshStoppedError(mesh._name, None, "stopped by client",
                                   f"{mesh._name}.{self._name}()", mesh._who(g))
        proc = mesh._procs[g]
        if mesh._owner_at is not None:
            lost = _owner_lost(node, mesh, g)
            if lost is not None:
                lost.endpoint = f"{mesh._name}.{self._name}()"
                return Future._resolved(exc=lost)
        if cast_router.ROUTERS and node.is_controller and \
                mesh._addrs[0] in cast_router.ROUTERS:       # cast down a tree before
            fut = _make(node)
            self._send(node, (g,), (proc,), collector(fut, proc, mesh._name, g,
                                                      f"{mesh._name}.{self._name}()",
                                                      mesh._who), args,
                       kwargs, ext=ext)
            return fut
        cause = _proc_failure(node, proc)
        if cause is not None:
            _seen(proc)
            return Future._resolved(exc=SupervisionError(mesh._name, g, cause,
                                                         f"{mesh._name}.{self._name}()",
                                                         mesh._who(g)))
        try:
            data, extras = node.encode((args, kwargs), (proc,))
        except TypeError as e:
            raise unsendable(f"{mesh._name}.{self._name}", e)
        except MessageTooLargeError as e:      # nothing sent: the call fails, as Monarch's
            return Future._resolved(exc=SupervisionError(
                mesh._name, g, _oversize(mesh, self._name, e),
                f"{mesh._name}.{self._name}()", mesh._who(g)))
        fut = _make(node)
        col = collector(fut, proc, mesh._name, g, f"{mesh._name}.{self._name}()",
                        mesh._who)
        addr = mesh._addrs[g]
        inst = getattr(_LOCAL, "instance", None)
        if inst is not None and inst.sync and addr == inst.addr:
            fut._self_wait = f"{inst.actor_id} calling {mesh._name}"
        port_id = node.register_port(col)
        try:
            node.send(addr, [pack_call(self._name, node.direct_addr, port_id, 0, node.key,
                                       ext, data), *extras])
            if _proc_failure(node, proc) is not None:  # it failed while we sent
                _late_dead(node, port_id, col, proc, addr)
        except BaseException:             # e.g. MemoryError: no room for the message
            node.drop_port(port_id)
            raise
        if self._timeout is not None:
            self._arm(node, port_id, [fut])
        return fut

    def choose(self, *args: P.args, **kwargs: P.kwargs) -> "Future[R]":
        mesh = self._mesh
        granks = mesh._granks()
        mesh._rr = (mesh._rr + 1) % len(granks)
        ext = mesh.__dict__.get("_ext_one")
        if ext is None:     # as Monarch: the chosen actor is rank 0 of a slice of one
            labels = mesh._shape.labels
            ext = mesh.__dict__["_ext_one"] = pickle.dumps((labels, (1,) * len(labels)), 5)
        return self._one(granks[mesh._rr], args, kwargs, ext, ChooseCollector)

    def broadcast(self, *args: P.args, **kwargs: P.kwargs) -> None:
        granks = self._mesh._granks()
        node, procs, direct = self._prepare(granks)
        self._send(node, granks, procs, None, args, kwargs, want_reply=False)

    def _send_to(self, args, kwargs, port, selection) -> None:
        """:func:`send`: fire and forget; replies (if ``port``) go to ``port``."""
        mesh = self._mesh
        granks = mesh._granks()
        if selection == "choose":
            mesh._rr = (mesh._rr + 1) % len(granks)
            granks = [granks[mesh._rr]]
        elif selection != "all":
            raise ValueError(f"selection must be 'all' or 'choose', not {selection!r}")
        node, procs, _ = self._prepare(granks)
        self._send(node, granks, procs, None, args, kwargs, want_reply=False,
                   reply_to=port)

    def stream(self, *args: P.args, **kwargs: P.kwargs) -> "Iterator[Future[R]]":
        mesh = self._mesh
        granks = mesh._granks()
        node, procs, direct = self._prepare(granks)
        futs = [Future._make(node if direct else None) for _ in granks]
        self._send(node, granks, procs, StreamCollector(futs, procs, mesh._name,
                                                        f"{mesh._name}.{self._name}()",
                                                        mesh._who_local),
                   args, kwargs, direct=direct)
        return iter(futs)

    def _accumulate(self, identity, combine, args, kwargs, merge=None,
                    spec=None) -> Future:
        mesh = self._mesh
        granks = mesh._granks()
        node, procs, direct = self._prepare(granks)
        fut = Future._make(node if direct else None)
        if merge is None:
            col = AccumCollector(fut, mesh._shape.extent, procs, mesh._name, identity,
                                 combine, f"{mesh._name}.{self._name}()")
        else:
            col = ReduceCollector(fut, mesh._shape.extent, procs, mesh._name, identity,
                                  combine, merge, f"{mesh._name}.{self._name}()")
        self._send(node, granks, procs, col, args, kwargs, direct=direct, reduce=spec)
        return fut

    def __repr__(self):
        return f"<endpoint {self._mesh._name}.{self._name}>"


def _oversize(mesh, name: str, e: MessageTooLargeError) -> str:
    """The cause a call refused for its size fails with (Monarch's words lead)."""
    return (f"undeliverable message for {mesh._name}.{name}(): {e}. The message was not "
            "sent; the actor is unaffected")


#: The wire name of a plain method called through ``as_endpoint(...,
#: explicit_response_port=True)`` is this prefix + its name (the actor then passes it
#: a Port first, as to an explicit-port endpoint).
EXPLICIT_PLAIN = "!"

_ADVERBS = frozenset({"call", "call_one", "choose", "broadcast", "stream", "with_timeout"})


class NotAnEndpoint:
    """``mesh.method`` for a method of the actor class not marked ``@endpoint``
    (Monarch's): calling it raises ``RuntimeError``; ``as_endpoint(mesh.method)`` makes
    it an :class:`Endpoint`; an adverb on it raises ``AttributeError`` saying so."""

    __slots__ = ("_ref", "_name")

    def __init__(self, ref, name: str) -> None:
        self._ref, self._name = ref, name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"Actor {self._ref._cls_name}.{self._name} is not annotated as an endpoint. "
            "To call it as one, add a @endpoint decorator to it, or directly wrap it in "
            f"one as_endpoint(obj.method).call(...)")

    def __getattr__(self, name: str):
        if name in _ADVERBS:
            raise AttributeError(
                f"{self._ref._cls_name}.{self._name} is not an endpoint: decorate it with "
                f"@endpoint, or call it through as_endpoint(mesh.{self._name}).{name}(...)")
        raise AttributeError(name)

    def __repr__(self):
        return f"<not an endpoint {self._ref._name}.{self._name}>"


def as_endpoint(not_an_endpoint: Any, *, propagate: Any = None,
                explicit_response_port: bool = False) -> "Endpoint":
    """``as_endpoint(mesh.method)``: a plain (non-``@endpoint``) method of a spawned
    actor mesh, as an :class:`Endpoint` with every adverb (Monarch's).

    The method runs as the actor's endpoints do, one message at a time; on an actor
    whose endpoints are all ``def`` an ``async def`` method fails the call with
    ``TypeError`` (the actor has no event loop).  ``explicit_response_port=True``: the
    method gets a :class:`Port` first and answers through it.  ``propagate`` (the
    tensor engine's shape propagation) is accepted and unused.  ``ValueError`` if
    the argument is not a method of a spawned actor mesh.
    """
    if not isinstance(not_an_endpoint, NotAnEndpoint):
        raise ValueError("expected an method of a spawned actor")
    name = not_an_endpoint._name
    explicit = bool(explicit_response_port)
    return Endpoint(not_an_endpoint._ref, EXPLICIT_PLAIN + name if explicit else name,
                    explicit)


def _late_dead(node, port_id, collector, proc, addr) -> None:
    # The proc was found dead after we checked: the failure sweep may have missed our
    # port, and our send may have reopened a socket to the dead address.
    node.forget((addr,))
    if collector is not None and node.port(port_id) is not None:
        if collector.proc_failed(proc, _proc_failure(node, proc) or "proc failed"):
            node.drop_port(port_id)
        node.wake_direct()


def send(endpoint: "Endpoint[P, R]", args: tuple, kwargs: dict, port: Any = None,
         selection: str = "all") -> None:
    """Fire-and-forget call of ``endpoint`` (``mesh.method``) on every actor of its mesh
    (``selection="all"``) or on one (``"choose"``), as Monarch's ``send``.

    Non-blocking.  With ``port`` (a :class:`Port`, e.g. from ``Channel.open()``), each
    actor's result (or its error) is sent to that port, tagged with the actor's rank
    in the call; an explicit-port endpoint receives ``port`` itself.  Without one,
    results are dropped and an endpoint that raises fails its actor (as
    ``broadcast``).
    """
    if not isinstance(endpoint, Endpoint):
        raise TypeError(f"send needs the endpoint of an actor mesh (mesh.method), not "
                        f"{endpoint!r}")
    if not isinstance(args, tuple):
        raise TypeError(f"args must be a tuple, not {type(args).__name__}")
    if not isinstance(kwargs, dict):
        raise TypeError(f"kwargs must be a dict, not {type(kwargs).__name__}")
    if port is not None and not isinstance(port, Port):
        raise TypeError(f"port must be a Port or None, not {port!r}")
    endpoint._send_to(args, kwargs, port, selection)


class Accumulator(Generic[P, R, A]):
    """``Accumulator(mesh.endpoint, identity, combine)``: fold replies of all actors.

    ``accumulate(*args, **kwargs)`` calls every actor and returns a Future of
    ``combine(...combine(combine(identity, r_a), r_b)..., r_z)`` in arrival order,
    folded in the caller's process (Monarch's semantics).  ``endpoint`` may also be
    any object with a ``stream(*args, **kwargs)`` method giving Futures (a stand-in in
    a test, a user's own endpoint type); those are awaited and folded in order.

    ``merge`` (ours; optional) is how two partial folds join: ``merge(a1, a2) -> A``,
    associative and commutative, with ``identity`` its identity (for a sum,
    ``merge=operator.add``).  With it, a call cast down a tree (meshes larger than
    ``MONARCH_CY_CAST_FANOUT``) is folded on the way back: each forwarder folds its
    subtree's replies with ``combine`` and sends one value up, so the caller's work per
    call stops growing with the mesh.  ``identity``, ``combine`` and ``merge`` are
    then pickled by value (``TypeError`` here when they cannot be) and run on the
    forwarders' I/O threads: keep them quick and non-blocking.
    """

    def __init__(self, endpoint: "Endpoint[P, R]", identity: A,
                 combine: Callable[[A, R], A], *,
                 merge: Callable[[A, A], A] | None = None) -> None:
        if isinstance(endpoint, EndpointProperty):
            raise TypeError(f"Accumulator needs the endpoint of an actor mesh "
                            f"(mesh.{endpoint._name}), not the class attribute "
                            f"{endpoint._name!r} of an Actor class: a class names no actors")
        if not isinstance(endpoint, Endpoint) and not callable(
                getattr(endpoint, "stream", None)):
            raise TypeError(f"Accumulator needs a mesh endpoint (mesh.method), "
                            f"not {endpoint!r}")
        if not callable(combine):
            raise TypeError(f"combine must be callable, not {combine!r}")
        if merge is not None and not callable(merge):
            raise TypeError(f"merge must be callable or None, not {merge!r}")
        if merge is not None and not isinstance(endpoint, Endpoint):
            raise TypeError(f"merge= needs a mesh endpoint (mesh.method), not {endpoint!r}")
        self._endpoint, self._identity, self._combine = endpoint, identity, combine
        self._merge = merge
        self._spec = self._fresh = None
        if merge is not None:
            self._spec = tree_reduce.reduce_spec(identity, combine, merge,
                                                 endpoint._mesh._name)
            self._fresh = tree_reduce.by_value(identity)

    def accumulate(self, *args: P.args, **kwargs: P.kwargs) -> "Future[A]":
        # with merge=, a fresh identity per call here too, as each forwarder gets one
        identity = self._identity if self._fresh is None else pickle.loads(self._fresh)
        if not isinstance(self._endpoint, Endpoint):
            return Future._from_coro(self._fold_stream(identity, args, kwargs))
        return self._endpoint._accumulate(identity, self._combine, args, kwargs,
                                          self._merge, self._spec)

    async def _fold_stream(self, value, args, kwargs):
        """Monarch's fold over any endpoint-like object: ``combine`` over the Futures of
        its ``stream(*args, **kwargs)``, in the order the stream gives them."""
        for fut in self._endpoint.stream(*args, **kwargs):
            value = self._combine(value, await fut)
        return value
