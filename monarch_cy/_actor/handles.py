"""Proc and host meshes as picklable references, valid in every process of one job.

A :class:`ProcMesh` pickles to ``(job tag, owner address, mesh id, name, procs,
shape)`` where each proc is ``(rank, key, direct address)``.  Unpickled:

* in the process that started those procs (the owner), it is the *same* mesh again
  (its live state: stop, respawn, failure records), sliced as it was sent;
* anywhere else in the job, a *remote view*: ``spawn`` works (SPAWN goes straight to
  the procs; the spawning actor owns and supervises the new mesh), so do slicing,
  ``sizes`` and ``stop()``, which asks the owner to stop the mesh and resolves when
  it has.  Proc deaths reach the view through the owner's PROC_DEAD broadcast, so a
  spawn or call on a dead proc fails rather than hangs.  Actor meshes spawned from a
  view are not re-spawned by ``respawn``: the owner does not know of them.

A :class:`HostMesh` of the local host pickles to "this host" of the receiver (the
procs of a job on one machine share it).  Host meshes of remote hosts hold the
connections to their agents in the controller and refuse to pickle, with the reason.

Every reference carries the job's fingerprint (an HMAC of the job secret); a process
of another job refuses it with :class:`ForeignJobError`.
"""

from __future__ import annotations

import threading

from monarch_cy._actor.errors import ForeignJobError
from monarch_cy._transport.protocol import MESH_CTL


__all__ = ["job_tag", "check_job", "reduce_proc_mesh", "reduce_host_mesh",
           "handle_mesh_ctl", "MESH_CTL"]


_tag = None
_views = {}              # (owner addr, mesh id) -> remote _State, one per process
_views_lock = threading.Lock()


def job_tag() -> bytes:
    """This job's handle fingerprint (16 bytes; creates the controller's node)."""
    global _tag
    if _tag is None:
        from monarch_cy._actor.controller import get_node
        _tag = get_node().keys.fingerprint(b"monarch_cy.actor handle")
    return _tag


def check_job(tag: bytes, what: str) -> None:
    """Raise :class:`ForeignJobError` unless ``tag`` is this job's."""
    if tag != job_tag():
        raise ForeignJobError(
            f"{what} was made by another monarch_cy job (another controller) and "
            "cannot be used here; pass handles only between processes of one job")


class _RemoteProc:
    """What a remote view knows of one proc: its rank and addresses (no process)."""

    __slots__ = ("rank", "key", "daddr", "popen", "alive")

    def __init__(self, rank, key, daddr) -> None:
        self.rank, self.key, self.daddr = rank, key, daddr
        self.popen = None
        self.alive = True


def reduce_proc_mesh(mesh) -> tuple:
    from monarch_cy._actor.controller import get_node
    st = mesh._state
    owner = getattr(st, "owner", None) or get_node().addr
    procs = tuple((p.rank, p.key, p.daddr) for p in st.procs)
    return (_rebuild_proc_mesh, (job_tag(), owner, st.mesh_id, st.name, procs,
                                 mesh._shape))


def _rebuild_proc_mesh(tag, owner, mesh_id, name, procs, shape):
    check_job(tag, f"proc mesh {name!r}")
    from monarch_cy._actor.controller import get_node
    from monarch_cy._actor.proc_mesh import ProcMesh, _State, this_proc
    node = get_node()
    if owner == node.addr:
        if mesh_id == 0:
            return this_proc()._new_with_shape(shape)
        from monarch_cy._actor import controller
        for st in controller.STATES:
            if st.mesh_id == mesh_id:
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


def stop_remote(mesh):
    """``ProcMesh.stop()`` on a remote view: the owner stops it; a Future of None."""
    from monarch_cy._actor.future import Future
    from monarch_cy._actor.controller import get_node
    from monarch_cy._transport.protocol import pack
    from monarch_cy._actor.ports import OneCollector
    st = mesh._state
    node = get_node()
    if st.stop_future is not None:
        return st.stop_future
    st.stopped = True
    fut = st.stop_future = Future._make(node)
    port = node.register_port(OneCollector(fut, st.owner, st.name, None))
    node.send(st.owner, [pack((MESH_CTL, "stop", st.mesh_id, node.direct_addr, port,
                               node.key))])
    return fut


def spawn_procs_remote(host_mesh, kwargs: dict):
    """``HostMesh.spawn_procs`` in a worker: the client starts the procs (it holds the
    fork server and the host agents) on the host of the asking proc, owned and
    supervised by the asking actor; blocks until the client answered (a few ms)."""
    import threading as _t
    from monarch_cy._actor.actor import context
    from monarch_cy._actor.future import Future
    from monarch_cy._actor.controller import get_node
    from monarch_cy._transport.protocol import pack
    from monarch_cy._actor.ports import OneCollector
    node = get_node()
    inst = context().actor_instance
    fut = Future._make(None)              # answered to the background inbox
    port = node.register_port(OneCollector(fut, node.controller_addr, "spawn_procs", None))
    payload = (host_mesh._shape, kwargs, node.key, inst.addr or None)
    data, extras = node.encode(payload, (node.controller_addr,))
    done = _t.Event()
    fut.add_done_callback(lambda f: done.set())
    node.send(node.controller_addr, [pack((MESH_CTL, "spawn_procs", 0, node.addr, port,
                                           node.key), data), *extras])
    if not done.wait(60):
        node.drop_port(port)
        raise TimeoutError("the client did not start the procs within 60 s")
    return fut.get()


def _spawn_for(node, data, extras):
    from monarch_cy._actor import controller
    from monarch_cy._actor.host_mesh import HostMesh
    shape, kwargs, asker, actor = node.decode(data, extras)
    proc = controller.LIVE_PROCS.get(asker)
    if proc is not None and getattr(proc, "remote", False):
        raise NotImplementedError(
            "spawn_procs from an actor on a remote host is not supported yet; spawn "
            "the procs in the client and send the ProcMesh to the actor")
    pm = HostMesh(shape).spawn_procs(**kwargs)
    if actor:
        pm._state.supervisor = actor          # its failures go to that actor
    return pm


def handle_mesh_ctl(node, hdr, data, extras) -> None:
    """The owner's side of a remote view's request (runs in the pump)."""
    _, op, mesh_id, raddr, port, rkey = hdr
    from monarch_cy._actor import controller
    from monarch_cy._actor.proc_mesh import ProcMesh
    if op == "spawn_procs":
        try:
            pm = _spawn_for(node, data, extras)
        except Exception as e:  # noqa: BLE001 - the asker raises it
            node.reply(raddr, port, None, False, e, rkey)
        else:
            node.reply(raddr, port, None, True, pm, rkey)
        return
    st = next((s for s in controller.STATES if s.mesh_id == mesh_id), None)
    if st is None or op != "stop":
        node.reply(raddr, port, None, False,
                   ValueError(f"no proc mesh {mesh_id} here for {op!r}"), rkey)
        return
    from monarch_cy._actor.shape import Shape
    fut = ProcMesh(st.procs, Shape.dense(("procs",), (len(st.procs),)), st).stop()
    fut.add_done_callback(lambda f: node.reply(raddr, port, None, True, None, rkey))


def reduce_host_mesh(mesh) -> tuple:
    if mesh._hosts is not None:
        raise TypeError(
            "a HostMesh of remote hosts cannot be sent to an actor: its agents' "
            "connections live in the controller. Spawn the procs in the controller and "
            "send the ProcMesh instead")
    return (_rebuild_host_mesh, (job_tag(), mesh._shape))


def _rebuild_host_mesh(tag, shape):
    check_job(tag, "host mesh")
    from monarch_cy._actor.host_mesh import HostMesh
    return HostMesh(shape)
