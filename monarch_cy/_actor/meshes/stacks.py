"""Stacks on demand: every thread's Python stack of every proc of a mesh, by rank.

* :func:`dump_stacks` — ``ProcMesh.dump_stacks()`` / ``ActorMesh.dump_stacks()``:
  a Future of a ``ValueMesh`` of :class:`monarch_cy._stacks.ProcStacks`, one per proc.
* :func:`handle_stacks` — the owner's side of ``MESH_CTL "stacks"`` (run from
  :mod:`.mesh_ctl`): a remote view of a mesh, or ``monarch-cy stacks`` from a second
  terminal (mesh id ``-1``: every live proc mesh of the job, and the controller).

Who reads: the process that started the procs (the controller) runs py-spy against
each proc's pid, a few at a time, in threads of its own: nothing is sent to the
procs, so a proc stuck in C code, holding the GIL or spinning forever is read all
the same and keeps running (why py-spy: :mod:`monarch_cy._stacks`).  The proc mesh
``this_proc()`` is the controller itself, read in-process.  A proc started by a host
agent is read by that agent, on its host (:mod:`monarch_cy._hosts.remote_stacks`).
"""

from __future__ import annotations

import threading

from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.base.shape import Shape
from monarch_cy._actor.base.value_mesh import ValueMesh
from monarch_cy._actor.model.ports import OneCollector
from monarch_cy._checks import check_timeout
from monarch_cy._transport.protocol import MESH_CTL, pack

__all__ = ["dump_stacks", "handle_stacks", "read_procs", "PARALLEL"]

PARALLEL = 8             # py-spy processes at once (each pauses its proc for a few ms)


def _read_one(proc, timeout: float, label: str):
    # deferred: py-spy's module (subprocess, json) loads only when stacks are asked for
    from monarch_cy._stacks import ProcStacks, dump, own_stacks
    import dataclasses
    h = proc.popen
    if h is None:                              # this_proc(): the controller itself
        out = own_stacks(proc.rank)
    elif h.returncode is not None or not proc.alive:
        out = ProcStacks(proc.rank, h.pid, "", error=f"the proc has exited "
                                                     f"(status {h.returncode})")
    elif h.pid is None:
        out = ProcStacks(proc.rank, None, "", error="the proc has not started yet")
    elif getattr(proc, "remote", False):       # its host's agent runs py-spy
        out = h.host.read_stacks(h.key, proc.rank, timeout)
    else:
        out = dump(h.pid, rank=proc.rank, timeout=timeout)
    return dataclasses.replace(out, label=label)


def read_procs(entries, timeout: float) -> list:
    """``[ProcStacks]`` for ``entries`` (``(proc, label)`` pairs), in their order;
    blocks until all are read (each py-spy bounded by ``timeout`` s).  The first
    :class:`~monarch_cy.errors.StackDumpError` (py-spy missing or refused) is raised."""
    entries = list(entries)
    out = [None] * len(entries)
    errors = []
    nxt = iter(range(len(entries)))
    lock = threading.Lock()

    def work():
        while True:
            with lock:
                i = next(nxt, None)
            if i is None or errors:
                return
            proc, label = entries[i]
            try:
                out[i] = _read_one(proc, timeout, label)
            except Exception as e:  # noqa: BLE001 - raised to the asker below
                errors.append(e)

    threads = [threading.Thread(target=work, name="monarch_cy-stacks", daemon=True)
               for _ in range(min(PARALLEL, len(entries)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def dump_stacks(st, procs, shape: Shape, timeout: float) -> Future:
    """The stacks of the procs of proc mesh state ``st`` at ``shape``'s ranks
    (``procs``: global rank -> proc): a Future of a ``ValueMesh`` shaped like the
    mesh (local rank order), each value a ``ProcStacks`` whose ``rank`` is the proc's
    rank in its proc mesh.  Returns at once; the reads run in a thread.  A remote view
    asks the mesh's owner (:func:`handle_stacks` there)."""
    check_timeout("timeout", timeout)
    ext = shape.extent
    vshape = Shape.dense(ext.labels, ext.sizes)
    granks = list(shape.global_ranks())
    fut = Future._make(None)
    if st.owner is not None:
        node = _state.get_node()
        port = node.register_port(OneCollector(fut, st.owner, st.name, None,
                                               call=f"{st.name}.dump_stacks()"))
        data, extras = node.encode((granks, timeout), (st.owner,))
        node.send(st.owner, [pack((MESH_CTL, "stacks", st.mesh_id, node.addr, port,
                                   node.key), data), *extras])
        out = Future._make(None)
        fut._then(lambda f: out._set_exception(f.exception())
                  if f.exception() is not None
                  else out._set_result(ValueMesh(vshape, f.get())))
        return out
    entries = [(procs[g], st.name) for g in granks]

    def run():
        try:
            fut._set_result(ValueMesh(vshape, read_procs(entries, timeout)))
        except BaseException as e:  # noqa: BLE001 - the caller's get() raises it
            fut._set_exception(e)
    threading.Thread(target=run, name="monarch_cy-stacks", daemon=True).start()
    return fut


def _job_entries() -> list:
    """Every proc of every live proc mesh of this process, and the process itself."""
    from monarch_cy._actor.meshes.proc_state import _Proc, _State  # deferred: import time
    me = _State(0, [], "controller")
    entries = [(_Proc(0, "", None, me), "controller")]
    for st in list(_state.STATES):
        if st.stopped or st.owner is not None:
            continue
        entries += [(p, st.name) for p in list(st.procs)]
    return entries


def handle_stacks(node, mesh_id, raddr, port, rkey, data, extras) -> None:
    """``MESH_CTL "stacks"`` in the owner's pump: read in a thread, then reply with a
    list of ``ProcStacks`` (or the error).  ``mesh_id`` ``-1``: the whole job."""
    try:
        granks, timeout = node.decode(data, extras)
        check_timeout("timeout", timeout)
        if mesh_id == -1:
            entries = _job_entries()
        else:
            st = next((s for s in _state.STATES if s.mesh_id == mesh_id), None)
            if st is None:
                raise ValueError(f"no proc mesh {mesh_id} here (stopped?)")
            entries = [(st.procs[g], st.name) for g in granks]
    except Exception as e:  # noqa: BLE001 - the asker raises it
        node.reply(raddr, port, None, False, e, rkey)
        return

    def run():
        try:
            value, ok = read_procs(entries, timeout), True
        except Exception as e:  # noqa: BLE001 - the asker raises it
            value, ok = e, False
        node.reply(raddr, port, None, ok, value, rkey)
    threading.Thread(target=run, name="monarch_cy-stacks", daemon=True).start()
