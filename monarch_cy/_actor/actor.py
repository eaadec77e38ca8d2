"""``Actor``, ``ActorMesh`` (a picklable reference to spawned actors) and context.

An ActorMesh is a *reference*: actor socket addresses and proc keys (one per global
rank) plus a :class:`Shape`.  Slicing makes a new reference; pickling one (as an
argument, return value or actor attribute) gives another process a mesh it can call
with the same adverbs.  Attribute access returns an :class:`Endpoint`; a name that is
not an endpoint raises ``AttributeError`` saying why.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

from monarch_cy._actor.endpoint import Endpoint, EndpointProperty
from monarch_cy._actor.shape import Extent, MeshTrait, Point, Shape

__all__ = ["Actor", "ActorMesh", "Context", "ActorInstance", "context", "current_rank",
           "current_size", "endpoint_table"]

A = TypeVar("A")

# Names an endpoint may not take: they are ActorMesh attributes.
RESERVED = frozenset({"slice", "split", "flatten", "rename", "size", "sizes", "extent",
                      "stop", "call", "call_one", "choose", "broadcast", "stream",
                      "initialized"})


class Actor:
    """Base class of actors.  Subclass it and mark remote methods with ``@endpoint``.

    ``__init__`` runs in the actor's own thread before any message is handled.  An
    actor whose endpoints are all ``def`` runs them one at a time, in arrival order,
    on its thread; an actor with any ``async def`` endpoint runs an asyncio loop on
    its thread: messages *start* in arrival order and interleave at ``await``.
    """

    @property
    def logger(self):
        import logging
        return logging.getLogger(type(self).__qualname__)


def endpoint_table(cls) -> tuple:
    """``({name: (explicit_port, is_async)}, frozenset(plain method names))``."""
    eps, plain = {}, set()
    for klass in reversed(cls.__mro__):
        for name, val in vars(klass).items():
            if isinstance(val, EndpointProperty):
                eps[name] = (val._explicit, val._is_async)
                plain.discard(name)
            elif callable(val) and not name.startswith("__"):
                plain.add(name)
                eps.pop(name, None)
    return eps, frozenset(plain)


class ActorMesh(MeshTrait, Generic[A]):
    """A mesh of actors of one class (a reference; picklable; sliceable)."""

    def __init__(self, name, cls_name, endpoints, plain, addrs, procs, shape,
                 state=None) -> None:
        self._name = name
        self._cls_name = cls_name
        self._endpoints = endpoints
        self._plain = plain
        self._addrs = tuple(addrs)
        self._procs = tuple(procs)
        self._shape = shape
        self._state = state
        self._rr = -1
        self._gr = None

    def _granks(self):
        g = self._gr
        if g is None:
            g = self._gr = self._shape.global_ranks()
        return g

    def _new_with_shape(self, shape: Shape) -> "ActorMesh":
        return ActorMesh(self._name, self._cls_name, self._endpoints, self._plain,
                         self._addrs, self._procs, shape, self._state)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        ep = self._endpoints.get(name)
        if ep is not None:
            e = Endpoint(self, name, ep[0])
            self.__dict__[name] = e     # later lookups skip __getattr__
            return e
        if name in self._plain:
            raise AttributeError(
                f"{self._cls_name}.{name} is not an endpoint: decorate it with @endpoint "
                f"to call it on a mesh")
        raise AttributeError(f"actor class {self._cls_name} has no endpoint {name!r} "
                             f"(endpoints: {sorted(self._endpoints)})")

    def __reduce__(self):
        return (ActorMesh, (self._name, self._cls_name, self._endpoints, self._plain,
                            self._addrs, self._procs, self._shape))

    def __repr__(self):
        return f"<ActorMesh {self._name!r} of {self._cls_name} {self.sizes!r}>"

    @property
    def name(self) -> str:
        return self._name

    @property
    def initialized(self):
        """A resolved Future (actors are ready as soon as spawn returns)."""
        from monarch_cy._actor.future import Future
        return Future._resolved(None)


class ActorInstance:
    """What ``context().actor_instance`` describes: the running actor (or client)."""

    __slots__ = ("name", "rank", "proc_rank", "actor_id", "creator", "addr", "sync")

    def __init__(self, name: str, rank: Point, proc_rank: int, actor_id: str,
                 addr: str = "") -> None:
        self.name, self.rank, self.proc_rank, self.actor_id = name, rank, proc_rank, actor_id
        self.creator = None
        self.addr = addr      # this actor's socket: a sync actor must not wait on itself
        self.sync = False

    def __repr__(self):
        return f"<ActorInstance {self.actor_id} rank={dict(self.rank)}>"


class Context:
    """``context()``: the current actor instance and the message being handled."""

    __slots__ = ("actor_instance",)

    def __init__(self, actor_instance: ActorInstance) -> None:
        self.actor_instance = actor_instance


_local = threading.local()
_CLIENT = ActorInstance("client", Point(0, Extent([], [])), -1, "client[0]")


def _set_current(inst) -> None:
    _local.instance = inst


def context() -> Context:
    """The calling actor's context (in the controller: the client instance)."""
    return Context(getattr(_local, "instance", None) or _CLIENT)


def current_rank() -> Point:
    """The calling actor's :class:`Point` in its mesh (rank 0 of an empty extent in
    the controller)."""
    return context().actor_instance.rank


def current_size() -> dict:
    """Sizes of the calling actor's mesh, by dimension name."""
    return dict(current_rank().extent)
