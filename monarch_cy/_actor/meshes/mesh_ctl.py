"""The owner's side of ``MESH_CTL`` (runs in its pump): a remote view asks it to stop
a proc mesh, a worker asks the client to start procs, or an actor asks for the procs
of the mesh it runs on (:mod:`.remote_ops` sends them); a remote view or
``monarch-cy stacks`` asks for stacks (:mod:`.stacks`)."""

from __future__ import annotations

from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.shape import Shape
from monarch_cy._actor.meshes import host_refs
from monarch_cy._actor.meshes.host_mesh import HostMesh
from monarch_cy._actor.meshes.proc_mesh import ProcMesh
from monarch_cy._actor.meshes.proc_stop import stop_procs
from monarch_cy._actor.meshes.stacks import handle_stacks

__all__ = ["handle_mesh_ctl"]


def _spawn_for(node, data, extras):
    shape, kwargs, asker, actor = node.decode(data, extras)
    uid, boot = kwargs.pop("_host", (None, None))
    proc = _state.LIVE_PROCS.get(asker)
    if uid is None and proc is not None and getattr(proc, "remote", False):
        raise NotImplementedError(
            "spawn_procs on the client's host from an actor on a remote host is not "
            "supported; spawn the procs in the client and send the ProcMesh to the actor")
    hosts = host_refs.lookup(uid)
    pm = HostMesh(shape, hosts, _owned=False, _bootstrap=boot).spawn_procs(**kwargs)
    if actor:
        pm._state.supervisor = (actor, asker)     # its failures go to that actor
    return pm


def handle_mesh_ctl(node, hdr, data, extras) -> None:
    """``(MESH_CTL, op, mesh id, reply addr, port id, reply key)``: ``op`` is
    ``"spawn_procs"``, ``"stop"``, ``"describe"`` or ``"stacks"``; the asker gets the
    ProcMesh, None, the stacks, or the error."""
    _, op, mesh_id, raddr, port, rkey = hdr
    if op == "stacks":
        handle_stacks(node, mesh_id, raddr, port, rkey, data, extras)
        return
    if op == "spawn_procs":
        try:
            pm = _spawn_for(node, data, extras)
        except Exception as e:  # noqa: BLE001 - the asker raises it
            node.reply(raddr, port, None, False, e, rkey)
        else:
            node.reply(raddr, port, None, True, pm, rkey)
        return
    st = next((s for s in _state.STATES if s.mesh_id == mesh_id), None)
    if st is not None and op == "describe":
        node.reply(raddr, port, None, True,
                   ProcMesh(st.procs, Shape.dense(("ranks",), (len(st.procs),)), st), rkey)
        return
    if st is None and op == "stop" and _state.made_here(mesh_id):
        node.reply(raddr, port, None, True, None, rkey)     # stopped and released
        return
    if st is None or op != "stop":
        node.reply(raddr, port, None, False,
                   ValueError(f"no proc mesh {mesh_id} here for {op!r}"), rkey)
        return
    fut = stop_procs(node, st)
    fut._then(lambda f: node.reply(raddr, port, None, True, None, rkey))
