"""The job's state in this process: the one way to the node, and the registries.

Everything the floors of the actor model share lives here, so that no floor reaches
up for it:

* :func:`get_node` — THE way to this process's node.  A worker's node is made by its
  bootstrap before any user code runs; the controller's is made on first use by the
  maker the top floor registers (:func:`set_node_maker`, done by
  :mod:`monarch_cy._actor.wiring` when the package is imported).
* the controller's registries: :data:`LIVE_PROCS` (proc key -> its ``_Proc``),
  :data:`STATES` (every proc mesh's state, for shutdown), :data:`ACTOR_HOME` (actor
  address -> ``(proc mesh state, global proc rank)``), :data:`HOSTS` (actor address ->
  the ``ActorHost`` running it in this process); the log sink (:func:`log_sink`);
* :func:`proc_failure` and :func:`dead_among` — THE way to read which procs the
  node knows dead (its ``dead`` map), safe against a concurrent revive;
* :data:`local` — the thread-local that names the actor running on this thread;
* the job's handle fingerprint (:func:`job_tag`, :func:`check_job`);
* :func:`this_proc` — this process as a proc mesh of one, provided by the meshes
  floor (:func:`provide_this_proc`); :func:`proc_mesh_of` — the proc mesh an actor
  was spawned on, from the description its spawn carried (:func:`provide_proc_mesh_of`).

All registries are plain dicts and lists: written by the controller's pump or under
the GIL by one statement, read anywhere.  Nothing here imports a floor above.
"""

from __future__ import annotations

import threading

from monarch_cy._errors import ForeignJobError
from monarch_cy._transport.current import current_node, node_or_make

__all__ = ["get_node", "set_node_maker", "next_id", "LIVE_PROCS", "STATES", "ACTOR_HOME",
           "HOSTS", "local", "job_tag", "check_job", "this_proc", "provide_this_proc",
           "proc_mesh_of", "provide_proc_mesh_of", "log_sink", "set_log_sink",
           "proc_failure", "dead_among", "forget_dead", "made_here"]

LIVE_PROCS: dict = {}   # proc key -> _Proc (children of this controller)
STATES: list = []       # every ProcMesh state made here, for shutdown and lookups
ACTOR_HOME: dict = {}   # actor addr -> (_State, global proc rank), controller-spawned
HOSTS: dict = {}        # actor address -> ActorHost, in this process

# The actor running on this thread (``local.instance``: an ActorInstance), unset in
# the client's threads.
local = threading.local()

_maker = None
_this_proc = None
_proc_mesh_of = None
_sink = None
_tag = None
_counter = [0]
_lock = threading.Lock()


def set_node_maker(make) -> None:
    """``make()`` makes the controller's node on first use (the top floor's)."""
    global _maker
    _maker = make


def get_node():
    """This process's node; in the controller it is made on first use (thread-safe)."""
    node = current_node()
    if node is not None:
        return node
    if _maker is None:
        raise RuntimeError("the actor runtime is not wired in this process: import "
                           "monarch_cy.actor (or monarch_cy._actor) first")
    return node_or_make(_maker)


def proc_failure(node, proc_key: str) -> str | None:
    """Why the proc ``proc_key`` is known dead here (the cause its calls fail with),
    or None while it is taken to be alive.

    THE way to read one proc's entry of ``node.dead``: a respawn revives a proc (its
    entry is removed, in the pump) while other threads call, so a check followed by a
    second read (``p in dead`` then ``dead[p]``) can raise ``KeyError``.  This is one
    ``dict.get`` (atomic under the GIL): the answer may be a moment old, never an
    exception.  Callers keep the value they got and do not read the map again."""
    dead = node.dead
    return dead.get(proc_key) if dead else None


def dead_among(node, proc_keys) -> dict:
    """``{proc key: cause}`` for those of ``proc_keys`` (a set, or a sequence) known
    dead now, read once (see :func:`proc_failure`); costs the smaller of the two
    sizes, so a long-lived controller's record of dead procs does not slow casts."""
    dead = node.dead
    if not dead:
        return {}
    if len(proc_keys) <= len(dead):
        get = dead.get
        out = {}
        for k in proc_keys:
            cause = get(k)
            if cause is not None:
                out[k] = cause
        return out
    wanted = proc_keys if isinstance(proc_keys, (set, frozenset, dict)) else set(proc_keys)
    return {k: c for k, c in dead.copy().items() if k in wanted}


def forget_dead(node, proc_keys) -> None:
    """Drop the record of procs gone for good (their mesh was stopped and every one
    of them exited): nothing can call them any more (a stopped mesh refuses calls),
    and a long-lived controller must not keep one entry per proc it ever ran."""
    dead = node.dead
    for k in proc_keys:
        dead.pop(k, None)


def next_id() -> int:
    """A fresh number for a mesh made by this process (thread-safe)."""
    with _lock:
        _counter[0] += 1
        return _counter[0]


def made_here(mesh_id: int) -> bool:
    """Whether :func:`next_id` handed out ``mesh_id`` in this process (a mesh made
    here, perhaps stopped and forgotten since)."""
    return 0 < mesh_id <= _counter[0]


def provide_this_proc(fn) -> None:
    """The meshes floor's ``this_proc`` (the only one; set at its import)."""
    global _this_proc
    _this_proc = fn


def this_proc():
    """This process as a proc mesh of one (``ProcMesh``)."""
    return _this_proc()


def provide_proc_mesh_of(fn) -> None:
    """The meshes floor's ``proc_mesh_of`` (the only one; set at its import)."""
    global _proc_mesh_of
    _proc_mesh_of = fn


def proc_mesh_of(desc):
    """The ``ProcMesh`` (as sliced) that ``desc``, a spawn's description of it,
    names: ``(owner address, mesh id, name, (labels, offset, sizes, strides))``."""
    return _proc_mesh_of(desc)


def set_log_sink(sink) -> None:
    global _sink
    _sink = sink


def log_sink():
    """The controller's log sink (``host.logs.LogSink``), or None in a worker."""
    return _sink


def job_tag() -> bytes:
    """This job's handle fingerprint (16 bytes; creates the controller's node)."""
    global _tag
    if _tag is None:
        _tag = get_node().keys.fingerprint(b"monarch_cy.actor handle")
    return _tag


def check_job(tag: bytes, what: str) -> None:
    """Raise :class:`ForeignJobError` unless ``tag`` is this job's."""
    if tag != job_tag():
        raise ForeignJobError(
            f"{what} was made by another monarch_cy job (another controller) and "
            "cannot be used here; pass handles only between processes of one job")
