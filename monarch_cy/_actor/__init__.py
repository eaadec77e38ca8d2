"""The actor model: private implementation of :mod:`monarch_cy.actor`.

Nothing here is public API; :mod:`monarch_cy.actor` re-exports what is.  Importing
this package is cheap: zmq, asyncio, cloudpickle and torch are imported lazily.  It
sits on :mod:`monarch_cy._transport` (messages, connections, serialization), makes
the node, and registers its handlers for the message kinds of
:mod:`monarch_cy._transport.protocol`.

Modules:

* :mod:`.shape` — named-dimension mesh algebra (``Extent``, ``Point``, ``Shape``).
* :mod:`.value_mesh` — ``ValueMesh``, the result of ``endpoint.call()``.
* :mod:`.errors` — the actor layer's errors (``ActorError``, ``SupervisionError``...).
* :mod:`.future` — ``Future``: a call's result, awaited or waited on.
* :mod:`.ports` — where replies go: the adverbs' collectors, ``Port``, ``Channel``.
* :mod:`.endpoint` — ``@endpoint``, the adverbs, ``send``, ``Accumulator``.
* :mod:`.concurrent` — ``@concurrent_endpoint``.
* :mod:`.actor` — ``Actor``, ``ActorMesh``, ``context()``.
* :mod:`.actor_host` — hosting actors in a proc: SPAWN, each actor's thread, stop.
* :mod:`.proc_mesh` — host and proc meshes: starting procs, spawning, stopping.
* :mod:`.proc_failure` — what the controller does when a proc exits or is killed.
* :mod:`.handles` — proc and host meshes as references valid in any proc of the job.
* :mod:`.controllers` — ``get_or_spawn_controller``.
* :mod:`.supervision` — failures up the ownership tree, ``unhandled_fault_hook``.
* :mod:`.heartbeat` — a proc that stops answering is declared failed.
* :mod:`.respawn` — recovery in place and restart policies.
* :mod:`.lifecycle` — ``shutdown_context()``.
* :mod:`.logs` — workers' stdout/stderr forwarded to the controller.
* :mod:`.launcher` — starting procs (fork server or exec).
* :mod:`.controller` — the controller's node (``get_node``), the job's secret and
  run directory, teardown at exit.
* :mod:`.bootstrap` — every worker proc's entry point.
"""
