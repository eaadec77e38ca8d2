"""Beyond one machine: host agents, remote procs, and scheduler job types.

The job secret they read lives in :mod:`monarch_cy._transport.secret`.

* :mod:`.protocol` -- the controller <-> agent messages, heartbeats, socket monitors.
* :mod:`.agent` -- the host agent (``python -m monarch_cy._hosts.agent``);
  :mod:`.proc_capture` -- its procs' fds 1 and 2, sent to the controller;
  :mod:`.remote_stacks` -- py-spy of its procs for the controller (both sides).
* :mod:`.link` -- the controller's side: one thread talking to every agent.
* :mod:`.attach` -- ``attach_to_workers`` and the remote hosts behind a ``HostMesh``.
* :mod:`.job`, :mod:`.slurm`, :mod:`.kubernetes`, :mod:`.local_jobs`, :mod:`.spmd_job`,
  :mod:`.login_job` -- job types (``monarch_cy.job``); :mod:`.job_cache` -- the job
  cache; :mod:`.exec_command` -- ``exec_command`` and its ``BashActor``;
  :mod:`.mesh_admin` -- a read-only HTTP description of host meshes (``_spawn_admin``).
* :mod:`.worker_loop` -- ``run_worker_loop_forever`` and its kin (``monarch_cy.actor``);
  :mod:`.worker_address` -- the worker address forms (listen, dial).
* :mod:`.netns` -- fake hosts as network namespaces (tests and benchmarks).
"""
