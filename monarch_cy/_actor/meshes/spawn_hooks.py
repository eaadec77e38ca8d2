"""What happens to each proc mesh as ``spawn_procs`` returns it (Monarch's
``register_proc_mesh_spawn_callback`` and ``Instance._children``).

:func:`announce` runs in the process that called ``spawn_procs``, after the mesh is
made and before ``spawn_procs`` returns it:

1. the mesh becomes a child of the calling actor (``context().actor_instance``;
   the client in a controller): it is appended to that instance's ``_children``,
   which stays None until the first one (meshes stopped since are dropped from it
   then, so that a long-lived client does not keep one per spawn);
2. each registered callback is called with the mesh, in registration order, in the
   calling thread.  A callback's exception propagates out of ``spawn_procs`` (the
   procs are started already; the caller still owns them through the mesh it did
   not get back: ``context().actor_instance._children[-1]``), as in Monarch.

The callbacks are this process's: registering one in the client does not reach
procs.  Register from any thread.
"""

from __future__ import annotations

import threading
from typing import Callable, List

from monarch_cy._actor.model.actor import context

__all__ = ["register_proc_mesh_spawn_callback", "unregister_proc_mesh_spawn_callback",
           "announce"]

_lock = threading.Lock()
_callbacks: List[Callable] = []


def register_proc_mesh_spawn_callback(callback: Callable) -> None:
    """Call ``callback(proc_mesh)`` for every proc mesh this process spawns from now
    on (see the module docstring).  Registering one twice calls it twice."""
    if not callable(callback):
        raise TypeError(f"callback must be callable (it gets the new ProcMesh), not "
                        f"{callback!r}")
    with _lock:
        _callbacks.append(callback)


def unregister_proc_mesh_spawn_callback(callback: Callable) -> None:
    """Stop calling ``callback`` (one registration of it); ``ValueError`` when it is
    not registered, as Monarch's."""
    with _lock:
        try:
            _callbacks.remove(callback)
        except ValueError:
            raise ValueError(f"{callback!r} is not a registered proc mesh spawn "
                             "callback") from None


def announce(proc_mesh):
    """Record ``proc_mesh`` as a child of the caller and run the callbacks; returns
    ``proc_mesh``."""
    inst = context().actor_instance
    kids = inst._children
    if kids:          # stopped meshes need no keeping: a long-lived client spawns many
        inst._children = [k for k in kids
                          if not getattr(getattr(k, "_state", None), "stopped", False)] or None
    inst._add_child(proc_mesh)
    with _lock:
        callbacks = list(_callbacks)
    for cb in callbacks:
        cb(proc_mesh)
    return proc_mesh
