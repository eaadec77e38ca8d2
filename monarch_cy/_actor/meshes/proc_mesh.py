"""Proc meshes: spawning actors on started procs, respawning and stopping them.

Procs are started by :meth:`HostMesh.spawn_procs <monarch_cy._actor.meshes.host_mesh.HostMesh>`,
which returns at once; messages to a proc queue until it is up.  ``ProcMesh.spawn``
also returns at once:
the SPAWN message precedes every call from this controller on the same pipe, so
``__init__`` runs before the first message.  ``this_proc()`` is the controller
process itself (actors spawned there run in controller threads).

Proc exit is watched through pidfds by the controller's pump; a proc that exits
(crash, ``os._exit`` in ``__init__``, kill, stop) fails every pending call on it
with :class:`SupervisionError` via :meth:`Node.proc_failed`, and later calls on it
fail at once.  ``stop()`` sends STOP, SIGKILLs what is left after a grace period,
reaps every child, and returns a Future resolved when all have exited
(:mod:`.proc_stop`).

A :class:`ProcMesh` pickles to ``(job tag, owner address, mesh id, name, procs,
shape)`` where each proc is ``(rank, key, direct address)``.  Unpickled:

* in the process that started those procs (the owner), it is the *same* mesh again
  (its live state: stop, respawn, failure records), sliced as it was sent;
* anywhere else in the job, a *remote view*: ``spawn`` works (SPAWN goes straight to
  the procs; the spawning actor owns and supervises the new mesh), so do slicing,
  ``sizes`` and ``stop()``, which asks the owner to stop the mesh and resolves when
  it has (:mod:`.remote_ops`).  Proc deaths reach the view through the owner's
  PROC_DEAD broadcast, so a spawn or call on a dead proc fails rather than hangs.
  Actor meshes spawned from a view are not re-spawned by ``respawn``: the owner does
  not know of them.

Every reference carries the job's fingerprint (an HMAC of the job secret); a process
of another job refuses it with :class:`ForeignJobError`.
"""

from __future__ import annotations

import os
import threading
from typing import Any, TypeVar

from monarch_cy._checks import check_timeout
from monarch_cy._errors import ForeignJobError, MeshStoppedError, SupervisionError
from monarch_cy._actor.base import client_faults
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.addresses import alloc_addr
from monarch_cy._actor.base.failure import failure_mesh_name, new_mesh_uid
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.base.shape import MeshTrait, Shape
from monarch_cy._actor.cast.tree import use_tree
from monarch_cy._actor.meshes import host_refs
from monarch_cy._actor.meshes.proc_state import _MeshRecord, _Proc, _State
from monarch_cy._actor.model.actor import ActorMesh, check_actor_class, context
from monarch_cy._transport.protocol import SPAWN, pack

T = TypeVar("T")

__all__ = ["ProcMesh", "this_proc", "proc_mesh_of"]

get_node = _state.get_node


class ProcMesh(MeshTrait):
    """A mesh of processes with named dimensions."""

    def __init__(self, procs, shape: Shape, state: _State) -> None:
        self._procs = procs          # global rank -> _Proc
        self._shape = shape
        self._state = state

    def _new_with_shape(self, shape):
        shape = getattr(shape, "_s", shape)        # Monarch's native Shape wraps ours
        out = ProcMesh(self._procs, shape, self._state)
        native = self.__dict__.get("_native")
        if native is not None and native.poll() is None:    # a pending handle assigned
            out._native = host_refs.Derived(native, shape)
        return out

    # Monarch's internals its tests read: the labels as a list, and the native handle
    # (meshes.host_refs: a resolved view with the mesh's region, unless the program
    # assigned a handle of its own, which pickling then waits for, as Monarch's does)
    @property
    def _labels(self) -> list:
        return list(self._shape.labels)

    @property
    def _proc_mesh(self):
        native = self.__dict__.get("_native")
        return native if native is not None else host_refs.Resolved(
            host_refs.NativeMesh(self._shape))

    @_proc_mesh.setter
    def _proc_mesh(self, value) -> None:
        self._native = value

    def __reduce__(self):
        native = self.__dict__.get("_native")
        if native is not None and native.poll() is None:
            native.block_on()                 # a pending handle: pickle once it is there
        st = self._state
        owner = st.owner or get_node().addr
        procs = tuple((p.rank, p.key, p.daddr) for p in st.procs)
        return (_rebuild_proc_mesh, (_state.job_tag(), owner, st.mesh_id, st.name, procs,
                                     self._shape))

    def spawn(self, name: str, Class: "type[T]", *args: Any, **kwargs: Any) -> T:
        """Spawn one ``Class(*args, **kwargs)`` per proc; returns the mesh at once.

        Non-blocking: the SPAWN message precedes every later call from this process
        on the same connection, so ``__init__`` runs before the first call.  The
        class and arguments are pickled once here (classes from ``__main__``, a
        notebook or a function go by value); an unpicklable one raises ``TypeError``
        here.  Spawning a name already used on this proc mesh gives a second,
        independent actor mesh, as in Monarch.  On a stopped proc mesh it raises
        Monarch's ``RuntimeError("`ProcMesh` has already been stopped")``; on a proc
        already dead, ``SupervisionError`` (Monarch's waits for the caller's timeout).
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
            raise RuntimeError("`ProcMesh` has already been stopped")     # Monarch's
        if st.setup is not None:
            from monarch_cy._actor.host import proc_setup  # deferred: import time (wire)
            err = proc_setup.failed(st.setup)
            if err is not None:
                raise err                       # its bootstrap raised (Monarch's)
        node = get_node()
        granks = self._shape.global_ranks()
        procs = [self._procs[g] for g in granks]
        for p in procs:
            why = _state.proc_failure(node, p.key)
            if why is not None:
                client_faults.note_seen(p.key)      # the program is told of it here
                raise SupervisionError(name, p.rank, f"cannot spawn: {why}")
        keys = [p.key for p in procs]
        try:
            data, extras = node.encode((cls, args, kwargs), keys)
        except TypeError as e:
            raise TypeError(f"arguments of {cls.__qualname__} cannot be sent: {e}") from None
        st.names.add(name)
        mid = _state.next_id()
        ext = self._shape.extent
        # who owns the actors, and (for context().actor_instance.proc_mesh) this mesh
        sh = self._shape
        spawner = _state.HOSTS.get(context().actor_instance.addr)
        # (kind, address, the proc mesh, the mesh's id, how failure texts name the
        # spawner, the spawner's process: where its actors' failures go, the spawner
        # as the actors' creator)
        owner = _owner(node) + ((st.owner or node.addr, st.mesh_id, st.name,
                                 (sh.labels, sh.offset, sh.sizes, sh.strides)),
                                new_mesh_uid(),
                                spawner.who if spawner is not None else "<root>",
                                node.key, context().actor_instance._as_creator())
        # spawned inside a worker: its own counter, so tag the addresses with its pid
        tag = "" if node.is_controller else f"w{os.getpid()}."
        given, addrs = addrs, []
        where = {}
        for i, p in enumerate(procs):
            addr = given[i] if given else alloc_addr(node, f"{tag}a{mid}.{p.rank}", p.key)
            addrs.append(addr)
            where[p.rank] = (addr, i)
        if use_tree(node, len(procs)):            # a few messages, not one per proc
            from monarch_cy._actor.cast import spawn as spawn_tree  # deferred: import time
            spawn_tree.send(node, procs, name, addrs, ext, owner, data, extras)
        else:
            for i, p in enumerate(procs):
                hdr = (SPAWN, name, addrs[i], i, ext.labels, ext.sizes, p.rank, owner)
                node.send(p.key, [pack(hdr, data), *extras])
        if node.is_controller and any(p.popen is not None for p in procs):
            st.meshes.append(_MeshRecord(name, cls, args, kwargs, owner,
                                         ext.labels, ext.sizes, where))
            for g, (addr, _) in where.items():
                _state.ACTOR_HOME[addr] = (st, g)
        mesh = ActorMesh(name, cls, eps, plain, addrs, keys,
                         Shape.dense(ext.labels, ext.sizes), st)
        mesh._pm_desc = owner[2]
        if spawner is not None:
            # stopped with its owner, and supervised by it (as Monarch's)
            mesh._failure_name = failure_mesh_name(name, owner)
            mesh._owner_at = (node.key, spawner.who, mesh._failure_name)
            spawner.children.append(mesh)
        return mesh

    @property
    def _host_mesh(self):
        """The host mesh (as sliced) these procs were spawned from (Monarch's
        attribute: its ``region`` says which hosts), kept with the mesh's state in
        the process that spawned them (so every slice and view there has it); None
        elsewhere and for ``this_proc()``."""
        return getattr(self._state, "host_mesh", None)

    @_host_mesh.setter
    def _host_mesh(self, host_mesh) -> None:
        self._state.host_mesh = host_mesh

    @property
    def initialized(self) -> Future:
        """A Future of ``True`` once ``spawn_procs(bootstrap=...)`` has run in every
        proc (at once when there is none); it raises the setup's failure."""
        setup = self._state.setup
        if setup is None:
            return Future._resolved(True)
        from monarch_cy._actor.host.proc_setup import initialized  # deferred: import time
        return initialized(setup)

    def logging_option(self, stream_to_client: bool = True,
                       aggregate_window_sec: float | None = None,
                       level: int = 20) -> Future:
        """How this mesh's output reaches this process (Monarch's three options).

        ``stream_to_client``: print the procs' lines here (default; they reach each
        proc's log file and failure tail either way); ``aggregate_window_sec``: hold
        lines that long and print each distinct line once, with the ranks that wrote
        it, in Monarch's ``>>> Aggregated Logs`` block (None: print at once;
        setting it while ``stream_to_client`` is False is a ``ValueError``, as in
        Monarch); ``level``: the level of the root ``logging`` logger in every proc
        of the mesh (``logging.INFO`` when a proc starts; 0 to 255).  See
        docs/observability.md.

        The first two take effect at once; lines held under an aggregation window
        are printed at once when aggregation is switched off (as Monarch flushes
        before it stops aggregating), and by the new deadline when the window
        shrinks.  Returns a ``Future[None]``, resolved once
        every proc applied ``level`` (at once when it is the mesh's level already),
        so Monarch's ``await procs.logging_option(...)`` works; ignoring it is fine.
        """
        check_timeout("aggregate_window_sec", aggregate_window_sec, allow_zero=True,
                      allow_none=True)
        if isinstance(level, bool) or not isinstance(level, int):
            raise TypeError(f"level must be a logging level (int), not {level!r}")
        if not 0 <= level <= 255:
            raise ValueError(f"level must be a logging level between 0 and 255, not "
                             f"{level!r}")
        if aggregate_window_sec and not stream_to_client:
            raise ValueError(f"aggregate_window_sec={aggregate_window_sec!r} needs "
                             "stream_to_client=True (Monarch: cannot set aggregate "
                             "window without streaming to client)")
        node = get_node()
        # deferred: import time (the output capture loads when procs first start)
        from monarch_cy._actor.launch.proc_output import drain_all
        sink, mid = _state.log_sink(), self._state.mesh_id
        sink.set_option(mid, bool(stream_to_client), aggregate_window_sec or None)
        # in the pump, after reading what the procs wrote so far: lines held under the
        # old window are printed now when aggregation stops, sooner when it shrinks
        node.call_in_pump(lambda: (drain_all(), sink.apply_window(mid)))
        st = self._state
        if getattr(st, "log_level", 20) == level:
            return Future._resolved(None)
        st.log_level = level
        # deferred: import time (the level actor loads with its first use)
        from monarch_cy._actor.host.logs import LEVEL_NAME, LevelActor
        setter = getattr(st, "level_actors", None)
        if setter is None:
            setter = st.level_actors = self._spawn(LEVEL_NAME, LevelActor, (), {})
        return Future._once(setter.set_level.call(level))

    def flush_logs(self) -> None:
        """Read what every local proc wrote so far and print it, held lines
        (aggregation) included, now; blocks until printed (at most 5 s)."""
        from monarch_cy._actor.launch.proc_output import drain_all  # deferred: import time
        node = get_node()
        done = Future._make(None)
        node.call_in_pump(lambda: (drain_all(), _state.log_sink().flush(),
                                   done._set_result(None)))
        done.get(5)

    def dump_stacks(self, timeout: float = 30.0) -> Future:
        """Every thread's Python stack of every proc of this mesh, read now.

        Returns at once a Future of a ``ValueMesh`` shaped like this mesh; each value
        is a ``ProcStacks`` (``rank``, the proc's rank in this proc mesh; ``pid``;
        ``host``; ``threads``, each with its name, ``active``, ``owns_gil`` and frames,
        innermost first; ``functions()``, every frame's name; ``error`` when that proc
        could not be read, e.g. it exited).  ``print()`` of a value shows it as
        ``py-spy dump`` does.  The controller runs py-spy against each proc's pid: nothing is
        sent to the procs, so a proc stuck in C code, holding the GIL or spinning in
        an endpoint is answered too, and it keeps running (nothing is killed; stop
        the mesh as usual afterwards).  ``timeout``: seconds each proc's read may
        take (its entry then says so).  The Future raises ``StackDumpError`` when
        py-spy is not installed or may not attach (ptrace permissions; the message
        says what to change).  See docs/observability.md, "Stacks".
        """
        from monarch_cy._actor.meshes.stacks import dump_stacks  # deferred: import time
        return dump_stacks(self._state, self._procs, self._shape, timeout)

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
        # deferred: import time (failure handling loads with the runtime)
        from monarch_cy._actor.meshes import failures, respawn
        return respawn.respawn(self, ranks, failures.on_exit)

    def stop(self) -> Future:
        """Stop every proc of this mesh; the Future resolves when all have exited.

        Pending calls on them fail with :class:`SupervisionError`; new calls on its
        actor meshes raise :class:`MeshStoppedError`.  Each actor's ``__cleanup__``
        runs after its current message (bounded: a stuck endpoint does not delay the
        stop past the SIGKILL grace).  Idempotent.
        """
        st = self._state
        # deferred: import time (stopping loads with the runtime)
        from monarch_cy._actor.meshes.proc_stop import stop_procs
        from monarch_cy._actor.meshes.remote_ops import stop_remote
        if st.owner is not None:
            return stop_remote(st)
        return stop_procs(get_node(), st)

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


def proc_mesh_of(desc) -> ProcMesh:
    """The proc mesh a spawn's description names (``context().actor_instance.
    proc_mesh``): ``(owner address, mesh id, name, shape as a tuple)``.  Known here
    (this process owns it, or holds a view of it): at once; else the owner is asked
    once for its procs (:mod:`.remote_ops`)."""
    owner, mesh_id, name, shape = desc
    shape = Shape(*shape)
    node = get_node()
    if owner == node.addr:
        if mesh_id == 0:
            return this_proc()._new_with_shape(shape)
        for st in _state.STATES:
            if st.mesh_id == mesh_id:
                return ProcMesh(st.procs, shape, st)
        raise ForeignJobError(f"proc mesh {name!r} (id {mesh_id}) is not known to the "
                              "process that made it any more")
    st = _views.get((owner, mesh_id))
    if st is None:
        # deferred: import time (remote_ops loads with the runtime)
        from monarch_cy._actor.meshes.remote_ops import describe_remote
        return describe_remote(owner, mesh_id, name)._new_with_shape(shape)
    return ProcMesh(st.procs, shape, st)


_views = {}              # (owner addr, mesh id) -> remote _State, one per process
_views_lock = threading.Lock()


class _RemoteProc:
    """What a remote view knows of one proc: its rank and addresses (no process)."""

    __slots__ = ("rank", "key", "daddr", "popen", "alive")

    def __init__(self, rank, key, daddr) -> None:
        self.rank, self.key, self.daddr = rank, key, daddr
        self.popen = None
        self.alive = True


def _rebuild_proc_mesh(tag, owner, mesh_id, name, procs, shape):
    _state.check_job(tag, f"proc mesh {name!r}")
    node = get_node()
    if owner == node.addr:
        if mesh_id == 0:
            return this_proc()._new_with_shape(shape)
        for st in _state.STATES:
            if st.mesh_id == mesh_id:
                return ProcMesh(st.procs, shape, st)
        if _state.made_here(mesh_id):     # stopped, and released since (proc_stop)
            st = _State(mesh_id, [_RemoteProc(*p) for p in procs], name)
            st.stopped = True
            return ProcMesh(st.procs, shape, st)
        raise ForeignJobError(f"proc mesh {name!r} (id {mesh_id}) is not known to the "
                              "process that made it any more")
    with _views_lock:
        st = _views.get((owner, mesh_id))
        if st is None:
            st = _State(mesh_id, [_RemoteProc(*p) for p in procs], name)
            st.owner = owner
            _views[(owner, mesh_id)] = st
    return ProcMesh(st.procs, shape, st)
