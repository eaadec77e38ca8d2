"""register_proc_mesh_spawn_callback: a registered callback gets each new proc mesh
before spawn_procs returns it, until unregistered; unregistering twice is a
ValueError; the client's Instance._children holds the meshes it spawned."""

from _obs import obs  # noqa: E402

from monarch._src.actor.proc_mesh import (  # noqa: E402
    ProcMesh, register_proc_mesh_spawn_callback, unregister_proc_mesh_spawn_callback)
from monarch.actor import context, this_host  # noqa: E402

seen = []


def callback(pm):
    seen.append((type(pm).__name__, isinstance(pm, ProcMesh), dict(pm.sizes)))


register_proc_mesh_spawn_callback(callback)
pm = this_host().spawn_procs(per_host={"gpus": 2})
obs("seen_while_registered", seen)
children = context().actor_instance._children or []
obs("is_a_child_of_the_client", any(c is pm for c in children))
unregister_proc_mesh_spawn_callback(callback)
pm2 = this_host().spawn_procs(per_host={"gpus": 1})
obs("seen_after_unregister", len(seen))
try:
    unregister_proc_mesh_spawn_callback(callback)
    obs("unregister_again", "accepted")
except Exception as e:  # noqa: BLE001 - the observation (the type; the texts differ)
    obs("unregister_again", type(e).__name__)
pm.stop().get(timeout=60)
pm2.stop().get(timeout=60)
