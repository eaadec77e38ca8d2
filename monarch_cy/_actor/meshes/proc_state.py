"""What the controller knows of its procs: one ``_Proc`` per incarnation, one
``_State`` per proc mesh (shared by its slices and the actor meshes on it), one
``_MeshRecord`` per actor mesh spawned on it (to spawn it again on a respawned rank),
and the addresses a proc binds.
"""

from __future__ import annotations

import threading
import time

from monarch_cy._actor.base import state as _state
from monarch_cy._transport.protocol import PROC_DEAD, pack

__all__ = ["_Proc", "_State", "_MeshRecord", "addrs_on", "broadcast_dead"]


class _Proc:
    """One incarnation of a proc (a respawn makes a new ``_Proc`` at the same rank,
    key and addresses).  ``starter()`` starts another incarnation like this one."""

    __slots__ = ("rank", "key", "popen", "alive", "state", "starter", "daddr", "started",
                 "last_seen", "silent", "up", "replaced", "reported", "done", "remote",
                 "cpu_sample", "hb_tree_at")

    def __init__(self, rank, key, popen, state, starter=None, daddr=None):
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
        self.supervisor = None         # (actor addr, its proc) that asked for these procs
        self.host_mesh = None          # the HostMesh (as sliced) that spawned them, here
        self.setup = None              # spawn_procs(bootstrap=...)'s actor mesh or None
        self.stop_exit = None          # fn(proc, exit code): the running stop's (proc_stop)


class _MeshRecord:
    """How an actor mesh was spawned, to spawn it again on respawned ranks."""

    __slots__ = ("name", "cls", "args", "kwargs", "owner", "labels", "sizes", "where")

    def __init__(self, name, cls, args, kwargs, owner, labels, sizes, where):
        self.name, self.cls, self.args, self.kwargs = name, cls, args, kwargs
        self.owner, self.labels, self.sizes = owner, labels, sizes
        self.where = where             # global proc rank -> (actor addr, rank in mesh)


def addrs_on(st, g: int, proc) -> tuple:
    """Every address a proc at global rank ``g`` binds (besides its key)."""
    out = [proc.daddr] if proc.daddr else []
    out += [rec.where[g][0] for rec in st.meshes if g in rec.where]
    return tuple(out)


def broadcast_dead(node, proc, cause: str, addrs) -> None:
    msg = pack((PROC_DEAD, proc.key, cause, addrs))
    for other in list(_state.LIVE_PROCS.values()):
        if other.key != proc.key and other.popen is not None:
            node.send(other.key, [msg])
