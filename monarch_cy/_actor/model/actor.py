"""``Actor``, ``ActorMesh`` (a picklable reference to spawned actors) and context.

An ActorMesh is a *reference*: actor socket addresses and proc keys (one per global
rank) plus a :class:`Shape`.  Slicing makes a new reference; pickling one (as an
argument, return value or actor attribute) gives another process a mesh it can call
with the same adverbs.  Attribute access returns an :class:`Endpoint`; a plain method
of the class gives a ``NotAnEndpoint`` (``as_endpoint`` makes it one); another name
raises ``AttributeError`` saying why.
"""

from __future__ import annotations

import contextvars
import pickle
from typing import Generic, TypeVar

from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.failure import actor_who
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.base.shape import Extent, MeshTrait, Point, Shape
from monarch_cy._actor.model.endpoint import Endpoint, EndpointProperty, NotAnEndpoint
from monarch_cy._transport.protocol import pack_call

__all__ = ["Actor", "ActorMesh", "Context", "ClientContext", "client_context",
           "CreatorInstance", "ROOT_CREATOR", "qualified_name",
           "ActorInstance", "context", "current_rank", "current_size", "current_actor_name", "endpoint_table", "check_actor_class",
           "post_to", "BUILTIN", "debugged_call_over"]

A = TypeVar("A")

# Built-in message names (never endpoints; handled by host.actor_host).
BUILTIN = frozenset({"__supervise__", "__ready__", "__stop__", "__stop_mesh__",
                     "__orphan__"})


def post_to(node, addr: str, method: str, payload=None) -> None:
    """Send the built-in message ``method`` (no reply port) to the actor at ``addr``,
    on the same connection as this process's calls to it (so after them)."""
    data, extras = node.encode(((payload,), {}) if payload is not None else ((), {}),
                               (node.key,))
    node.send(addr, [pack_call(method, "", 0, 0, node.key, None, data), *extras])


class Actor:
    """Base class of actors.  Subclass it and mark remote methods with ``@endpoint``.

    ``__init__`` runs in the actor's own thread before any message is handled.  An
    actor whose endpoints are all ``def`` runs them one at a time, in arrival order,
    on its thread.  An actor whose endpoints are all ``async def`` runs an asyncio
    loop on its thread and, as in Monarch, still handles one message at a time, in
    arrival order: each endpoint's coroutine is awaited to its end before the next
    message starts, except ``@concurrent_endpoint`` ones, whose bodies start as tasks
    when their turn comes.  Mixing the two kinds in one class is refused at spawn, as
    in Monarch (a sync endpoint that waits would stall the loop of the async ones).

    ``class A(Actor, interleave=True)`` (ours; a Monarch program never passes it) makes
    every async endpoint of ``A`` and its subclasses concurrent: messages start in
    arrival order and interleave at ``await``.  That avoids the deadlock of an endpoint
    that waits for another message of its own actor (a condition another endpoint
    sets), which Monarch users meet; ``interleave=False`` in a subclass turns it off.
    """

    def __init_subclass__(cls, *, interleave: bool | None = None, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if interleave is not None:
            if not isinstance(interleave, bool):
                raise TypeError(f"interleave must be True or False, not {interleave!r}")
            cls._mcy_interleave = interleave

    @property
    def logger(self):
        import logging  # deferred: import time (logging costs ~10 ms; rarely used)
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


def _is_coroutine_fn(fn) -> bool:
    return bool(getattr(getattr(fn, "__code__", None), "co_flags", 0) & 0x80)


def check_actor_class(cls) -> tuple:
    """Validate an actor class for spawning; return its :func:`endpoint_table`.

    Raises ``TypeError`` for a non-Actor or an ``async def __init__`` and
    ``ValueError`` for a class mixing ``def`` and ``async def`` endpoints (or an
    ``__cleanup__`` of the other kind), with Monarch's rule and reason.
    """
    if not (isinstance(cls, type) and issubclass(cls, Actor)):
        raise TypeError(f"spawn needs a subclass of Actor, not {cls!r}")
    if _is_coroutine_fn(cls.__init__):
        raise TypeError(f"{cls.__qualname__}.__init__ must be a plain def, not async def")
    eps, plain = endpoint_table(cls)
    clash = sorted(set(eps) & BUILTIN)
    if clash:
        raise ValueError(f"{cls.__qualname__} has endpoints named {clash!r}, which are "
                         "reserved for the runtime's own messages; rename them")
    sync = sorted(n for n, (_, asy) in eps.items() if not asy)
    asy = sorted(n for n, (_, a) in eps.items() if a)
    why = ("a synchronous endpoint that waits would deadlock the asyncio loop that runs "
           "the async ones")
    if sync and asy:
        raise ValueError(f"{cls.__qualname__} mixes both async and sync endpoints "
                         f"(sync: {sync}, async: {asy}); make them all one kind: {why}")
    cleanup = getattr(cls, "__cleanup__", None)
    if cleanup is not None:
        if sync and _is_coroutine_fn(cleanup):
            raise ValueError(f"{cls.__qualname__} has sync endpoints {sync} but an async "
                             f"__cleanup__; make __cleanup__ synchronous too: {why}")
        if asy and not _is_coroutine_fn(cleanup):
            raise ValueError(f"{cls.__qualname__} has async endpoints {asy} but a "
                             f"synchronous __cleanup__; make __cleanup__ async too: {why}")
    return eps, plain


# ActorMesh attributes that are properties: an endpoint of the same name needs a class
# of its own to shadow them (plain methods are shadowed by the instance dict).
_MESH_PROPERTIES = frozenset({"extent", "sizes", "name", "initialized"})
_mesh_classes = {}


def _mesh_class(endpoints) -> type:
    clash = frozenset(endpoints) & _MESH_PROPERTIES
    if not clash:
        return ActorMesh
    cls = _mesh_classes.get(clash)
    if cls is None:
        ns = {n: property(lambda self, n=n: self.__getattr__(n)) for n in clash}
        ns["__slots__"] = ()
        cls = _mesh_classes[clash] = type("ActorMesh", (ActorMesh,), ns)
    return cls


def _rebuild_actor_mesh(name, cls_name, endpoints, plain, addrs, procs, shape, full,
                        who_base=None, owner_at=None, pm_desc=None):
    state = None
    home = _state.ACTOR_HOME.get(addrs[0]) if addrs else None
    if home is not None:
        state = home[0]
    m = ActorMesh(name, cls_name, endpoints, plain, addrs, procs, shape, state, who_base)
    m._owner_at = owner_at
    m._pm_desc = pm_desc
    if not full:
        m._set_sliced()
    return m


class ActorMesh(MeshTrait, Generic[A]):
    """A mesh of actors of one class (a reference; picklable; sliceable).

    Endpoints are attributes: ``mesh.method`` is an :class:`Endpoint`.  An endpoint may
    take the name of a mesh attribute (``stop``, ``size``, ``slice``...): on that
    mesh the endpoint wins, and the mesh operation stays reachable through the class
    (``ActorMesh.stop(mesh)``).
    """

    def __new__(cls, name, cls_name, endpoints, *args, **kwargs):
        return object.__new__(_mesh_class(endpoints) if cls is ActorMesh else cls)

    def __init__(self, name, cls_name, endpoints, plain, addrs, procs, shape,
                 state=None, who_base=None) -> None:
        if isinstance(cls_name, type):
            who_base = (f"{cls_name.__module__}.{cls_name.__qualname__}",
                        shape.extent)
            cls_name = cls_name.__qualname__
        # (module.Class, the extent as spawned): failure texts name an actor by it
        self._who_base = who_base
        self._name = name
        self._cls_name = cls_name
        self._endpoints = endpoints
        self._plain = plain
        self._addrs = tuple(addrs)
        self._procs = tuple(procs)
        self._shape = shape
        self._state = state
        self._full = True          # the whole mesh as spawned (message_rank = rank)
        self._ext = None           # else the pickled extent calls carry (message_rank)
        self._rr = -1
        self._gr = None
        self._plan = None          # its route down the cast tree (controller, large meshes)
        # spawned by an actor: (that actor's proc, its name in failure texts, the
        # mesh's failure name); calls fail once that proc is known dead
        self._owner_at = None
        self._pm_desc = None       # the proc mesh it was spawned on, described (_proc_mesh)
        d = self.__dict__
        for ep, (explicit, _) in endpoints.items():
            if hasattr(ActorMesh, ep) and ep not in _MESH_PROPERTIES:
                d[ep] = Endpoint(self, ep, explicit)     # shadows the mesh method

    def _granks(self):
        g = self._gr
        if g is None:
            g = self._gr = self._shape.global_ranks()
        return g

    def _new_with_shape(self, shape: Shape) -> "ActorMesh":
        m = ActorMesh(self._name, self._cls_name, self._endpoints, self._plain,
                      self._addrs, self._procs, shape, self._state, self._who_base)
        m._owner_at = self._owner_at
        m._pm_desc = self._pm_desc
        m._set_sliced()
        return m

    def _set_sliced(self) -> None:
        self._full = False
        # Pickled once per slice; the actor unpickles it only if it asks message_rank.
        self._ext = pickle.dumps((self._shape.labels, self._shape.sizes), 5)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        ep = self._endpoints.get(name)
        if ep is not None:
            e = Endpoint(self, name, ep[0])
            if name not in _MESH_PROPERTIES:
                self.__dict__[name] = e     # later lookups skip __getattr__
            return e
        if name in self._plain:
            return NotAnEndpoint(self, name)        # as_endpoint(mesh.name) calls it
        raise AttributeError(f"actor class {self._cls_name} has no endpoint {name!r} "
                             f"(endpoints: {sorted(self._endpoints)})")

    def __reduce__(self):
        return (_rebuild_actor_mesh, (self._name, self._cls_name, self._endpoints,
                                      self._plain, self._addrs, self._procs, self._shape,
                                      self._full, self._who_base, self._owner_at,
                                      self._pm_desc))

    def _who(self, g: int) -> str:
        """Monarch's name, in failure texts, of the actor at rank ``g`` of the mesh as
        spawned (``<root>.<module.Class name{'gpus': 1/2}>``), or ``name[g]`` when
        the class is not known here."""
        base = self._who_base
        if base is None:
            return f"{self._name}[{g}]"
        return actor_who(base[0], self._name, Point(g, base[1]))

    def _who_local(self, rank: int) -> str:
        """As :meth:`_who`, for rank ``rank`` of this slice."""
        return self._who(self._granks()[rank])

    def __repr__(self):
        sizes = dict(zip(self._shape.labels, self._shape.sizes))
        return f"<ActorMesh {self._name!r} of {self._cls_name} {sizes!r}>"

    @property
    def name(self) -> str:
        return self._name

    @property
    def _proc_mesh(self):
        """The proc mesh (as sliced) this actor mesh was spawned on (Monarch's
        attribute); in a process that never saw it, its owner is asked once."""
        if self._pm_desc is None:
            raise AttributeError("_proc_mesh")
        return _state.proc_mesh_of(self._pm_desc)

    @property
    def initialized(self):
        """A Future of None resolved once every actor of this mesh has been
        constructed (its ``__init__`` returned), or raising the first error: the
        actor's failure, or the spawn's refusal (Monarch's ``error spawning actor
        mesh``, on a proc where an actor has failed).  Calls need not wait for it:
        each is handled after ``__init__`` anyway."""
        return Future._once(Endpoint(self, "__ready__", False).call(), None)

    def stop(self, reason: str = "stopped by client"):
        """Stop these actors (not their procs): each one finishes the messages sent
        to it before this call, runs ``__cleanup__(None)``, drops its instance (so
        ``__del__`` runs) and answers every later call with ``MeshStoppedError``.
        Returns a Future resolved (to ``()``, as Monarch's) when every actor has stopped; non-blocking.
        Down a cast tree, a dead forwarder is routed around (the live actors below
        it are stopped directly) and, there, an actor whose proc died counts as
        stopped (:data:`~.routed.REROUTED`).
        """
        # Monarch's stop() resolves to ()
        return Future._once(Endpoint(self, "__stop_mesh__", False).call(str(reason)), ())


class ActorId(str):
    """``actor_instance.actor_id``: the text ``name[rank]``, with the attribute of
    Monarch's ``ActorAddr`` that programs read, ``actor_name`` (the actor mesh's
    name; ``client`` for the client)."""

    def __new__(cls, text: str, actor_name: str) -> "ActorId":
        self = super().__new__(cls, text)
        self.actor_name = actor_name
        return self

    def __reduce__(self):
        return (ActorId, (str(self), self.actor_name))


def qualified_name(ins) -> str:
    """Monarch's name of an instance and its creators: ``<root>.<module.Class
    name{'gpus': 0/2}>`` (the client is ``<root>``)."""
    names = []
    while ins is not None:
        prefix = "" if ins.class_name is None else f"{ins.class_name} "
        names.append(f"<{prefix}{ins.name}{repr(ins.rank) if len(ins.rank) else ''}>")
        ins = ins.creator
    return ".".join(reversed(names))


class CreatorInstance:
    """Who spawned an actor (Monarch's ``CreatorInstance``; picklable): ``name``,
    ``class_name`` (None for the client), ``rank`` (its :class:`Point`) and
    ``creator`` (its own creator; None for the client).  ``repr`` is its
    :func:`qualified_name`."""

    __slots__ = ("rank", "name", "class_name", "creator")

    def __init__(self, rank: Point, name: str, class_name, creator) -> None:
        self.rank, self.name, self.class_name, self.creator = rank, name, class_name, \
            creator

    def __reduce__(self):
        return (CreatorInstance, (self.rank, self.name, self.class_name, self.creator))

    def __repr__(self) -> str:
        return qualified_name(self)


#: The client as a creator: what an actor the client spawned has as ``creator``.
ROOT_CREATOR = CreatorInstance(Point(0, Extent([], [])), "root", None, None)


class ActorInstance:
    """What ``context().actor_instance`` describes: the running actor (or client).

    Attributes: ``name`` (the actor mesh's name; ``root`` for the client, as
    Monarch's), ``rank`` (this actor's :class:`Point` in its mesh), ``proc_rank``,
    ``actor_id`` (``name[rank]``, an :class:`ActorId`), ``class_name`` (``module.Class``;
    None for the client), ``creator`` (a :class:`CreatorInstance`: who spawned it;
    None for the client).  ``repr``/``str`` is Monarch's :func:`qualified_name`.
    ``proc`` is this actor's own proc as a proc mesh of one;
    ``proc_mesh`` the proc mesh (as sliced) the actor was spawned on.
    ``_children`` (Monarch's): the proc meshes this actor (or the client) spawned, in
    order, or None before the first; assignable (a test harness trims it), and it
    keeps them referenced for this instance's life.
    """

    __slots__ = ("name", "rank", "proc_rank", "actor_id", "creator", "addr", "sync",
                 "host", "_pm", "_children", "class_name", "_ctx")

    def __init__(self, name: str, rank: Point, proc_rank: int, actor_id: str,
                 addr: str = "", host=None) -> None:
        self.name, self.rank, self.proc_rank = name, rank, proc_rank
        self.actor_id = ActorId(actor_id, name)
        self.creator = None
        self.class_name = None
        self.addr = addr      # this actor's socket: a sync actor must not wait on itself
        self.sync = False
        self.host = host      # the ActorHost running it (None for the client)
        self._pm = None       # proc_mesh, once asked
        self._children = None
        self._ctx = None      # its Context, once asked (context() is context())

    def _add_child(self, child) -> None:
        """Record a proc mesh this instance spawned (``spawn_procs`` does)."""
        if self._children is None:
            self._children = [child]
        else:
            self._children.append(child)

    @property
    def proc(self):
        """This actor's proc, as a ProcMesh of one (``this_proc()``)."""
        return _state.this_proc()

    @property
    def proc_mesh(self):
        """The proc mesh this actor was spawned on, as the spawner sliced it (its
        ``rank`` is this actor's point in it); in the client, ``this_proc()``.  The
        first read in a process that never saw that mesh asks its owner (a few ms)."""
        pm = self._pm
        if pm is None:
            owner = getattr(self.host, "owner", None)
            if owner is None or len(owner) < 3:
                pm = _state.this_proc()
            else:
                pm = _state.proc_mesh_of(owner[2])
            self._pm = pm
        return pm

    def stop(self, reason: str | None = None) -> None:
        """Stop this actor gracefully (Monarch's): the messages already sent to it
        are handled first, then ``__cleanup__(None)`` runs and every later call is
        answered with ``MeshStoppedError``; its owner is not told of a failure.
        Returns at once.  In the client it raises ``RuntimeError``."""
        if self.host is None:
            raise RuntimeError("stop() is for actors; the client is not an actor (use "
                               "shutdown_context() to end the job)")
        self.host.stop(reason)

    def kill(self, reason: str | None = None) -> None:
        """Fail this actor now without ``__cleanup__`` (Monarch's): its owner's
        ``__supervise__`` (or the client's fault hook) gets a MeshFailure naming
        ``reason`` and every later call is answered with ``SupervisionError``; the
        endpoint that called it still finishes.  In the client it raises
        ``RuntimeError``."""
        if self.host is None:
            raise RuntimeError("kill() is for actors; the client has no owner to report "
                               "to (raise an exception or call sys.exit instead)")
        self.host.kill(reason)

    def abort(self, reason: str | None = None) -> None:
        """Fail this actor now, as an unhandled error would (Monarch's semantics):
        ``__cleanup__`` runs, its owner's ``__supervise__`` (or the client's fault
        hook) gets a MeshFailure whose cause names ``reason``, and every later call is
        answered with ``SupervisionError``.  Returns: the endpoint that called it
        still finishes and its caller gets its result.  In the client it raises
        ``RuntimeError``: the client is not an actor and has no owner."""
        if self.host is None:
            raise RuntimeError("abort() is for actors; the client has no owner to report "
                               "to (raise an exception or call sys.exit instead)")
        self.host.abort(reason)

    def _as_creator(self) -> CreatorInstance:
        """This instance as the creator of the actors it spawns."""
        if self.host is None:
            return ROOT_CREATOR
        return CreatorInstance(self.rank, self.name, self.class_name, self.creator)

    def __repr__(self):
        return qualified_name(self)


_message = contextvars.ContextVar("monarch_cy_message", default=None)
# (the message being handled, post_mortem(traceback), finish()) once a debugger paused
# this message's endpoint (monarch_cy._debug.remote_pdb): if the endpoint then raises,
# its host pauses post-mortem before failing the call, as Monarch's does; once it
# returned, the host calls finish() (debugged_call_over), which ends the debug session.
_debugged = contextvars.ContextVar("monarch_cy_debugged", default=None)


def debugged_call_over() -> None:
    """The endpoint call being handled returned: end the debug session a breakpoint
    in it opened, if any.  Blocks for one call to the debug controller only then."""
    d = _debugged.get()
    if d is not None and d[0] is _message.get():
        _debugged.set(None)
        d[2]()


class Context:
    """``context()``: the current actor instance and the message being handled."""

    __slots__ = ("actor_instance",)

    def __init__(self, actor_instance: ActorInstance) -> None:
        self.actor_instance = actor_instance

    @property
    def message_rank(self) -> Point:
        """Where this actor sits in the *call* being handled: its Point in the mesh
        or slice the caller sent to (not its rank in its own mesh when the caller
        sliced it; 0-dimensional for ``choose`` and outside any message)."""
        msg = _message.get()
        if msg is None:
            return Point(0, Extent([], []))
        local, ext = msg[0], msg[1]      # (a third item: the caller's trace context)
        if ext is None:
            return self.actor_instance.rank
        return Point(local, Extent(*pickle.loads(ext)))


_local = _state.local
_CLIENT = ActorInstance("root", Point(0, Extent([], [])), -1, "client[0]")
_CLIENT.actor_id = ActorId("client[0]", "client")     # Monarch's client address names it


def _set_current(inst) -> None:
    _local.instance = inst


class ClientContext:
    """The client's :class:`Context`, made at its first use: what :func:`context`
    gives in a thread that runs no actor (the controller's threads, a helper thread
    of a worker).  ``context()`` asks :meth:`get` each time (Monarch's
    ``actor_mesh._client_context``, a lazily made value, is read the same way, and
    programs patch its ``get``); ``_val`` stays None until the first ``get``."""

    def __init__(self) -> None:
        self._val: Context | None = None

    def get(self) -> Context:
        val = self._val
        if val is None:
            val = self._val = Context(_CLIENT)
        return val


client_context = ClientContext()


#: True in a context (thread, task) that has been given the client's context by
#: :func:`context`: its log records name ``<root>``, as Monarch's (where ``context()``
#: sets its ``_context`` variable there).
client_context_used = contextvars.ContextVar("monarch_cy_client_context_used",
                                             default=False)


def context() -> Context:
    """The calling actor's context (in the controller: the client instance)."""
    inst = getattr(_local, "instance", None)
    if inst is not None:
        ctx = inst._ctx
        if ctx is None:
            ctx = inst._ctx = Context(inst)
        return ctx
    if not client_context_used.get():
        client_context_used.set(True)
    return client_context.get()


def current_actor_name() -> str:
    """The calling actor's id as a string (``"client[0]"`` in the controller)."""
    return str(context().actor_instance.actor_id)


def current_rank() -> Point:
    """Where the calling actor sits in the message being handled, as Monarch's: its
    :class:`Point` in the mesh *as the caller sliced it* (``context().message_rank``;
    rank 0 of an empty extent in the controller and for ``choose``).  The actor's
    rank in its own mesh is ``context().actor_instance.rank``."""
    return context().message_rank


def current_size() -> dict:
    """Sizes of the message's extent (the caller's slice), by dimension name."""
    return dict(current_rank().extent)
