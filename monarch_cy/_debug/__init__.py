"""The remote debugger: ``breakpoint()`` in any actor, driven from the controller.

Modules, bottom up (see docs/observability.md, "Debugger"):

* :mod:`.hook` -- installed in every worker: ``sys.breakpointhook`` and
  ``pdb.set_trace`` start a :class:`~.remote_pdb.RemotePdb` (stdlib only; the rest
  of this package is imported at the first breakpoint);
* :mod:`.commands` -- the ``monarch_dbg>`` command language (Monarch's: ``list``,
  ``attach``, ``cast``, ``continue``, ``quit``, ``help``), parsed without lark;
* :mod:`.sessions` -- the paused sessions the controller knows, by actor name and
  rank, and the lines waiting for them;
* :mod:`.remote_pdb` -- the worker's pdb, whose stdin and stdout are calls to the
  debug controller;
* :mod:`.controller` -- ``DebugController``, the job's one debug actor (in the
  controller's process), and ``debug_controller()``;
* :mod:`.console` -- the ``monarch_dbg>`` prompt over a terminal or a remote client;
* :mod:`.server` -- the authenticated endpoint ``monarch-cy debug`` connects to,
  and the file that lets it find a job on this machine;
* :mod:`.cli` -- the ``monarch-cy debug`` command.
"""
