"""The actor model: private implementation of :mod:`monarch_cy.actor`.

Nothing here is public API; :mod:`monarch_cy.actor` re-exports what is.  It sits on
:mod:`monarch_cy._transport` (messages, connections, serialization) and uses only its
public API.  Importing it is cheap: the runtime (the node, hosting, launching,
failure handling) loads at the controller's first use of it, and zmq, asyncio,
cloudpickle and torch are imported only where needed.

Floors, bottom up.  A module imports only its own floor and the floors below; no
import loop spans two floors (``tests/test_layers.py`` checks it and prints the map).

``base/`` — the job's state and the values everything else passes around

* :mod:`.base.state` — THE way to the node (``get_node``), the job's registries
  (procs, proc meshes, actor homes, actor hosts), the current actor, the job tag.
* :mod:`.base.addresses` — addresses and ports for sockets the job binds.
* :mod:`.base.shape` — named-dimension mesh algebra (``Extent``, ``Point``, ``Shape``).
* :mod:`.base.value_mesh` — ``ValueMesh``, the result of ``endpoint.call()``.
* :mod:`.base.future` — ``Future``: a call's result, awaited or waited on.
* :mod:`.base.failure` — ``MeshFailure``, what supervision passes up.
* :mod:`.base.client_faults` — the client's failures: grace, "seen", the fault hook.

``cast/`` — the cast tree: messages to large meshes as a few messages per hop

* :mod:`.cast.reduce` — folding replies on the way back (``Accumulator(merge=)``).
* :mod:`.cast.tree` — the tree's plan and skeleton (send down, pass on), casts, relays.
* :mod:`.cast.router` — which path each call takes (per-sender FIFO), stops down trees.
* :mod:`.cast.spawn`, :mod:`.cast.stop`, :mod:`.cast.heartbeat` — spawns, stops and
  heartbeats down the tree.

``model/`` — the actor model: ports, endpoints, actors

* :mod:`.model.ports` — where replies go: the adverbs' collectors, ``Port``, ``Channel``.
* :mod:`.model.routed` — an endpoint's call down a cast tree.
* :mod:`.model.endpoint` — ``@endpoint``, the adverbs, ``send``, ``Accumulator``.
* :mod:`.model.actor` — ``Actor``, ``ActorMesh``, ``context()``.
* :mod:`.model.concurrent` — ``@concurrent_endpoint``.

``host/`` — running actors inside a proc

* :mod:`.host.supervise_call` — ``__supervise__``/``__cleanup__`` bounded in time.
* :mod:`.host.proc_setup` — ``spawn_procs(bootstrap=...)``: setup before any actor.
* :mod:`.host.actor_host` — SPAWN, each actor's thread, failing an actor.
* :mod:`.host.stopping` — stopping this proc's actors and the proc (STOP).
* :mod:`.host.logs` — workers' output forwarded to the controller, the log sink.

``launch/`` — starting procs

* :mod:`.launch.rundir` — the job's run directory and its reaper.
* :mod:`.launch.job_file` — the job file: how ``monarch-cy stacks`` finds a running job.
* :mod:`.launch.proc_bind` — CPU and memory binding of a proc.
* :mod:`.launch.visible_gpus` — which GPUs a proc sees.
* :mod:`.launch.bootstrap_command` — the program a proc runs.
* :mod:`.launch.launcher` — the fork server, or a fresh interpreter per proc.
* :mod:`.launch.proc_start` — each proc's configuration and environment.

``meshes/`` — proc and host meshes and their supervision

* :mod:`.meshes.proc_state` — what the controller knows of each proc and proc mesh.
* :mod:`.meshes.restart_policy` — ``RestartPolicy``.
* :mod:`.meshes.heartbeat` — a proc that stops answering is declared failed.
* :mod:`.meshes.respawn` — recovery in place.
* :mod:`.meshes.failures` — what the controller does when a proc or actor fails.
* :mod:`.meshes.remote_ops` — asking a mesh's owner (stop a view, start procs).
* :mod:`.meshes.stacks` — every thread's stack of every proc (py-spy), by rank.
* :mod:`.meshes.proc_stop` — stopping procs; ``stop_all`` at exit.
* :mod:`.meshes.proc_mesh` — ``ProcMesh``, ``this_proc()``, proc meshes as handles.
* :mod:`.meshes.controllers` — ``get_or_spawn_controller``.
* :mod:`.meshes.host_refs` — host meshes outside the controller: references,
  a proc's own host, Monarch's native views (``region``).
* :mod:`.meshes.host_mesh` — ``HostMesh``, ``this_host()``, ``spawn_procs``.
* :mod:`.meshes.mesh_ctl` — the owner's side of MESH_CTL.
* :mod:`.meshes.lifecycle` — ``shutdown_context()``.

Top

* :mod:`.wiring` — THE table of message handlers (controller and worker), the
  controller's node, a worker's set-up, the fork server's module list.
* :mod:`.bootstrap` — every worker proc's entry point (and the fork server's).
"""

from monarch_cy._actor.base import state as _state


def _make_controller_node():
    # deferred: import time (the controller's runtime loads at its first use)
    from monarch_cy._actor.wiring import make_controller_node
    return make_controller_node()


def _this_proc():
    # deferred: import time (the meshes floor loads with the public API or the runtime)
    from monarch_cy._actor.meshes.proc_mesh import this_proc
    return this_proc()


def _proc_mesh_of(desc):
    # deferred: import time (the meshes floor loads with the public API or the runtime)
    from monarch_cy._actor.meshes.proc_mesh import proc_mesh_of
    return proc_mesh_of(desc)


_state.set_node_maker(_make_controller_node)
_state.provide_this_proc(_this_proc)
_state.provide_proc_mesh_of(_proc_mesh_of)
