"""Proc meshes: spawning actors on started procs, respawning and stopping them.

Procs are started by :meth:`HostMesh.spawn_procs <monarch_cy._actor.host_mesh.HostMesh>`,
which returns at once; messages to a proc queue until it is up.  ``ProcMesh.spawn``
also returns at once:
the SPAWN message precedes every call from this controller on the same pipe, so
``__init__`` runs before the first message.  ``this_proc()`` is the controller
process itself (actors spawned there run in controller threads).

Proc exit is watched through pidfds by the controller's pump; a proc that exits
(crash, ``os._exit`` in ``__init__``, kill, stop) fails every pending call on it
with :class:`SupervisionError` via :meth:`Node.proc_failed`, and later calls on it
fail at once.  ``stop()`` sends STOP, SIGKILLs what is left after a grace period,
reaps every child, and returns a Future resolved when all have exited.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

from monarch_cy._checks import check_timeout
from monarch_cy._actor.actor import ActorMesh, check_actor_class
from monarch_cy._actor.errors import MeshStoppedError, SupervisionError
from monarch_cy._actor.future import Future
from monarch_cy._actor.proc_failure import _ctl, _pack
from monarch_cy._actor.shape import MeshTrait, Shape
from monarch_cy._transport.protocol import SPAWN, STOP


def get_node():
    from monarch_cy._actor.controller import get_node as g
    return g()



T = TypeVar("T")

__all__ = ["ProcMesh", "this_proc", "stop_all"]

_GRACE = 3.0


class _Proc:
    """One incarnation of a proc (a respawn makes a new ``_Proc`` at the same rank,
    key and addresses).  ``starter()`` starts another incarnation like this one."""

    __slots__ = ("rank", "key", "popen", "alive", "state", "starter", "daddr", "started",
                 "last_seen", "silent", "up", "replaced", "reported", "done", "remote",
                 "cpu_sample", "hb_tree_at")

    def __init__(self, rank, key, popen, state, starter=None, daddr=None):
        import threading
        import time
        self.rank, self.key, self.popen, self.state = rank, key, popen, state
        self.alive = True
        self.starter, self.daddr = starter, daddr
        self.started = time.monotonic()
        self.last_seen = 0.0
        self.silent = False            # failed by heartbeat (killed, exit pending)
        self.up = threading.Event()    # answered a heartbeat
        self.replaced = False          # killed by a respawn: its exit is no failure
        self.reported = False
        self.done = threading.Event()  # its exit has been processed
        self.remote = False            # started by a host agent on another machine
        self.cpu_sample = None         # (state, CPU s) at the last late heartbeat look
        self.hb_tree_at = 0.0          # when a heartbeat last went down the tree to it


class _State:
    """Shared by a proc mesh, its slices and the actor meshes spawned on it."""

    def __init__(self, mesh_id, procs, name="procs", policy=None):
        import threading
        self.mesh_id = mesh_id
        self.procs = procs
        self.name = name
        self.stopped = False
        self.names = set()
        self.stop_future = None
        self.stop_waiting = set()
        self.meshes = []               # _MeshRecord per actor mesh, in spawn order
        self.failed_ranks = set()      # global ranks failed and not yet respawned
        self.policy = policy           # RestartPolicy or None
        self.restarts = 0
        self.respawn_lock = threading.Lock()
        self.owner = None              # remote view (see .handles): the owner's address
        self.supervisor = None         # address of the actor that asked for these procs
        self.setup = None              # spawn_procs(bootstrap=...)'s actor mesh or None


class _MeshRecord:
    """How an actor mesh was spawned, to spawn it again on respawned ranks."""

    __slots__ = ("name", "cls", "args", "kwargs", "owner", "labels", "sizes", "where")

    def __init__(self, name, cls, args, kwargs, owner, labels, sizes, where):
        self.name, self.cls, self.args, self.kwargs = name, cls, args, kwargs
        self.owner, self.labels, self.sizes = owner, labels, sizes
        self.where = where             # global proc rank -> (actor addr, rank in mesh)


ACTOR_HOME = {}     # actor addr -> (_State, global proc rank), controller-spawned actors


class ProcMesh(MeshTrait):
    """A mesh of processes with named dimensions."""

    def __init__(self, procs, shape: Shape, state: _State) -> None:
        self._procs = procs          # global rank -> _Proc
        self._shape = shape
        self._state = state

    def _new_with_shape(self, shape):
        return ProcMesh(self._procs, shape, self._state)

    def __reduce__(self):
        from monarch_cy._actor.handles import reduce_proc_mesh
        return reduce_proc_mesh(self)

    def spawn(self, name: str, Class: "type[T]", *args: Any, **kwargs: Any) -> T:
        """Spawn one ``Class(*args, **kwargs)`` per proc; returns the mesh at once.

        Non-blocking: the SPAWN message precedes every later call from this process
        on the same connection, so ``__init__`` runs before the first call.  The
        class and arguments are pickled once here (classes from ``__main__``, a
        notebook or a function go by value); an unpicklable one raises ``TypeError``
        here.  Spawning a name already used on this proc mesh gives a second,
        independent actor mesh, as in Monarch.
        """
        return self._spawn(name, Class, args, kwargs)  # type: ignore[return-value]

    def _spawn(self, name: str, cls, args, kwargs, addrs=None) -> ActorMesh:
        if not isinstance(name, str):
            raise TypeError(f"actor mesh name must be a str, not {name!r}")
        if not name or not name.replace("_", "a").replace("-", "a").isalnum():
            raise ValueError(f"actor mesh name {name!r} must be non-empty letters, "
                             "digits, '_' or '-'")
        eps, plain = check_actor_class(cls)
        st = self._state
        if st.stopped:
            raise MeshStoppedError(name, None, "cannot spawn on a stopped proc mesh")
        node = get_node()
        granks = self._shape.global_ranks()
        procs = [self._procs[g] for g in granks]
        for p in procs:
            if p.key in node.dead:
                raise SupervisionError(name, p.rank, f"cannot spawn: {node.dead[p.key]}")
        keys = [p.key for p in procs]
        try:
            data, extras = node.encode((cls, args, kwargs), keys)
        except TypeError as e:
            raise TypeError(f"arguments of {cls.__qualname__} cannot be sent: {e}") from None
        st.names.add(name)
        mid = _ctl.next_id()
        ext = self._shape.extent
        owner = _owner(node)
        # spawned inside a worker: its own counter, so tag the addresses with its pid
        tag = "" if node.is_controller else f"w{os.getpid()}."
        given, addrs = addrs, []
        where = {}
        for i, p in enumerate(procs):
            addr = given[i] if given else _ctl.alloc_addr(node, f"{tag}a{mid}.{p.rank}",
                                                           p.key)
            addrs.append(addr)
            where[p.rank] = (addr, i)
        from monarch_cy._actor import spawn_tree
        if spawn_tree.use_tree(node, procs):      # a few messages, not one per proc
            spawn_tree.send(node, procs, name, addrs, ext, owner, data, extras)
        else:
            for i, p in enumerate(procs):
                hdr = (SPAWN, name, addrs[i], i, ext.labels, ext.sizes, p.rank, owner)
                node.send(p.key, [_pack(hdr, data), *extras])
        if node.is_controller and any(p.popen is not None for p in procs):
            st.meshes.append(_MeshRecord(name, cls, args, kwargs, owner,
                                         ext.labels, ext.sizes, where))
            for g, (addr, _) in where.items():
                ACTOR_HOME[addr] = (st, g)
        return ActorMesh(name, cls, eps, plain, addrs, keys,
                         Shape.dense(ext.labels, ext.sizes), st)

    @property
    def initialized(self) -> Future:
        """A Future of ``True`` once ``spawn_procs(bootstrap=...)`` has run in every
        proc (at once when there is none); it raises the setup's failure."""
        setup = self._state.setup
        if setup is None:
            return Future._resolved(True)
        from monarch_cy._actor.proc_setup import initialized
        return initialized(setup)

    def logging_option(self, stream_to_client: bool = True,
                       aggregate_window_sec: float | None = None,
                       level: int | None = None) -> Future:
        """Forward workers' output to this process (default) and optionally aggregate
        identical lines across ranks over a window of ``aggregate_window_sec``.

        Takes effect at once; returns an already-resolved ``Future[None]`` so that
        Monarch's ``await procs.logging_option(...)`` works (ignoring it is fine).
        ``level`` is accepted for Monarch's signature and not used: monarch_cy
        forwards every line the procs write (see docs/monarch-compat.md).
        """
        check_timeout("aggregate_window_sec", aggregate_window_sec, allow_zero=True,
                      allow_none=True)
        get_node()
        _ctl.SINK.options[self._state.mesh_id] = (bool(stream_to_client),
                                                  aggregate_window_sec)
        if level is not None and (isinstance(level, bool) or not isinstance(level, int)):
            raise TypeError(f"level must be a logging level (int), not {level!r}")
        return Future._resolved(None)

    def flush_logs(self) -> None:
        """Print aggregated log lines now instead of at the end of the window."""
        node = get_node()
        done = Future._make(None)
        node.call_in_pump(lambda: (_ctl.SINK.flush(), done._set_result(None)))
        done.get(5)

    def respawn(self, ranks=None) -> Future:
        """Restart failed ranks in place; the Future resolves (to the list of global
        ranks restarted) once every actor re-spawned on them finished ``__init__``.

        ``ranks``: ranks of this mesh (default: every failed one).  See
        :mod:`.respawn` for exactly what happens; raises ``MeshStoppedError`` on a
        mesh stopped on purpose and ``ValueError`` for a healthy or unknown rank.

        With ``ranks=None`` the ranks are those whose failure the controller has
        processed: an actor failure seen by a caller as ``SupervisionError`` can
        precede the report that marks its rank failed by a moment.
        """
        from monarch_cy._actor import respawn
        return respawn.respawn(self, ranks)

    def stop(self) -> Future:
        """Stop every proc of this mesh; the Future resolves when all have exited.

        Pending calls on them fail with :class:`SupervisionError`; new calls on its
        actor meshes raise :class:`MeshStoppedError`.  Each actor's ``__cleanup__``
        runs after its current message (bounded: a stuck endpoint does not delay the
        stop past the SIGKILL grace).  Idempotent.
        """
        st = self._state
        if st.owner is not None:
            from monarch_cy._actor.handles import stop_remote
            return stop_remote(self)
        node = get_node()
        if st.stop_future is not None:
            return st.stop_future
        st.stopped = True
        from monarch_cy._actor import supervision
        supervision.note_recovered(st)
        fut = st.stop_future = Future._make(None)
        live = [p for p in st.procs if p.popen is not None and p.alive]
        st.stop_waiting = set(live)
        if not live:
            fut._set_result(None)
            return fut
        from monarch_cy._actor.actor_host import post_to
        from monarch_cy._actor import cast_router
        from monarch_cy._actor import stop_tree
        treed, idle = cast_router.stop_down_trees(node, st.meshes)
        stops = []
        for p in live:
            # __stop__ to each actor on the path its calls took (they run first), or
            # none where no call is in flight (the proc posts it itself); then STOP to
            # the proc, which waits for its actors' cleanup.
            sent = []
            for rec in st.meshes:
                if p.rank in rec.where:
                    a = rec.where[p.rank][0]
                    if a not in treed and a not in idle:
                        post_to(node, a, "__stop__")
                    if a not in idle:
                        sent.append(a)
            stops.append((p, tuple(sent)))
        if stop_tree.use_tree(node, live):       # a few messages, not one per proc
            stop_tree.send(node, stops)
        else:
            for p, sent in stops:
                node.send(p.key, [_pack((STOP, sent))])

        def kill_rest():
            for p in live:
                if p.alive:
                    try:
                        p.popen.kill()
                    except OSError:
                        pass
        node.add_timer(_GRACE, kill_rest)
        return fut

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop().get()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.stop()

    def __repr__(self):
        return f"<ProcMesh {self.sizes!r}>"


def _owner(node) -> tuple:
    """Who owns a mesh spawned now: the calling actor, or the client."""
    from monarch_cy._actor.actor import context
    inst = context().actor_instance
    if inst.addr:
        return ("actor", inst.addr)
    return ("client", getattr(node, "controller_addr", None) or node.addr)


_this_proc = None


def this_proc() -> ProcMesh:
    """The controller process as a proc mesh of one (actors run in its threads)."""
    global _this_proc
    if _this_proc is None:
        node = get_node()
        procs = []
        st = _State(0, procs)
        procs.append(_Proc(0, node.addr, None, st))
        _this_proc = ProcMesh(procs, Shape.dense((), ()), st)
    return _this_proc


def stop_all(grace: float = 2.0) -> None:
    """Stop every proc mesh still running and reap every child (used at exit)."""
    import subprocess
    import time
    node = get_node()
    live = [p for p in list(_ctl.LIVE_PROCS.values()) if p.popen is not None]
    for st in _ctl.STATES:
        st.stopped = True
    hdr = _pack((STOP,))
    for p in live:
        try:
            node.send(p.key, [hdr])
        except Exception:
            pass
    deadline = time.monotonic() + grace
    for p in live:
        left = max(0.0, deadline - time.monotonic())
        try:
            p.popen.wait(left)
        except subprocess.TimeoutExpired:
            p.popen.kill()
            try:
                p.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass
    from monarch_cy._actor.launcher import shutdown_zygote
    shutdown_zygote()
