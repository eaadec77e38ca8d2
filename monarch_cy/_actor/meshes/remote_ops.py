"""Asking the owner: what a process that is not a proc mesh's owner sends to it.

* :func:`stop_remote` — ``ProcMesh.stop()`` on a remote view (a proc mesh unpickled
  in another process of the job, :mod:`.proc_mesh`): the owner stops the mesh; the
  Future resolves when it has.
* :func:`spawn_procs_remote` — ``HostMesh.spawn_procs`` inside a worker: the client
  starts the procs (it holds the fork server and the host agents), owned and
  supervised by the asking actor.
* :func:`describe_remote` — the procs of a mesh this process has no view of
  (``context().actor_instance.proc_mesh`` in an actor spawned on it).

Each sends one ``MESH_CTL`` message; the owner's side is :mod:`.mesh_ctl`.
"""

from __future__ import annotations

import threading

from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.model.actor import context
from monarch_cy._actor.model.ports import OneCollector
from monarch_cy._transport.protocol import MESH_CTL, pack

__all__ = ["stop_remote", "spawn_procs_remote", "describe_remote"]


def stop_remote(st) -> Future:
    """Stop the remote view ``st`` (a proc mesh's state) through its owner; a Future
    of None.  Idempotent."""
    node = _state.get_node()
    if st.stop_future is not None:
        return st.stop_future
    st.stopped = True
    fut = st.stop_future = Future._make(node)
    port = node.register_port(OneCollector(fut, st.owner, st.name, None))
    node.send(st.owner, [pack((MESH_CTL, "stop", st.mesh_id, node.direct_addr, port,
                               node.key))])
    return fut


def spawn_procs_remote(shape, kwargs: dict):
    """``HostMesh.spawn_procs`` in a worker, for a host mesh of ``shape``: blocks until
    the client answered (a few ms); returns the ProcMesh or raises its error."""
    node = _state.get_node()
    inst = context().actor_instance
    fut = Future._make(None)              # answered to the background inbox
    port = node.register_port(OneCollector(fut, node.controller_addr, "spawn_procs", None))
    payload = (shape, kwargs, node.key, inst.addr or None)
    data, extras = node.encode(payload, (node.controller_addr,))
    done = threading.Event()
    fut._then(lambda f: done.set())
    node.send(node.controller_addr, [pack((MESH_CTL, "spawn_procs", 0, node.addr, port,
                                           node.key), data), *extras])
    if not done.wait(60):
        node.drop_port(port)
        raise TimeoutError("the client did not start the procs within 60 s")
    return fut.get()


def describe_remote(owner: str, mesh_id: int, name: str, timeout: float = 60.0):
    """The proc mesh ``mesh_id`` of ``owner``, as a view in this process (the owner
    answers with the mesh; it unpickles to the view).  Blocks until answered."""
    node = _state.get_node()
    fut = Future._make(None)              # answered to the background inbox
    port = node.register_port(OneCollector(fut, owner, name, None))
    done = threading.Event()
    fut._then(lambda f: done.set())
    node.send(owner, [pack((MESH_CTL, "describe", mesh_id, node.addr, port, node.key))])
    if not done.wait(timeout):
        node.drop_port(port)
        raise TimeoutError(f"the owner of proc mesh {name!r} did not describe it within "
                           f"{timeout:g} s")
    return fut.get()
