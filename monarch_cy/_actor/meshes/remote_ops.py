"""Asking the owner: what a process that is not a proc mesh's owner sends to it.

* :func:`stop_remote` — ``ProcMesh.stop()`` on a remote view (a proc mesh unpickled
  in another process of the job, :mod:`.proc_mesh`): the owner stops the mesh; the
  Future resolves when it has.
* :func:`spawn_procs_remote` — ``HostMesh.spawn_procs`` inside a worker: the client
  starts the procs (it holds the fork server and the host agents), owned and
  supervised by the asking actor.

Both send one ``MESH_CTL`` message; the owner's side is :mod:`.mesh_ctl`.
"""

from __future__ import annotations

import threading

from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.model.actor import context
from monarch_cy._actor.model.ports import OneCollector
from monarch_cy._transport.protocol import MESH_CTL, pack

__all__ = ["stop_remote", "spawn_procs_remote"]


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
    fut.add_done_callback(lambda f: done.set())
    node.send(node.controller_addr, [pack((MESH_CTL, "spawn_procs", 0, node.addr, port,
                                           node.key), data), *extras])
    if not done.wait(60):
        node.drop_port(port)
        raise TimeoutError("the client did not start the procs within 60 s")
    return fut.get()
