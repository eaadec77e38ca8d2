"""Running actors inside a proc.

Modules, bottom up: :mod:`.supervise_call`, :mod:`.proc_setup`,
:mod:`.traced_endpoints` (an actor's endpoints, instrumented when telemetry is on),
:mod:`.loop_lifecycle` (an async actor's supervision, stop and failure on its loop),
:mod:`.actor_failure` (an actor's failure, supervision and stop), :mod:`.init_guard`
(a stop answered while ``__init__`` runs), :mod:`.actor_host`,
:mod:`.child_failures` (a dead proc's actors, for their owners' ``__supervise__``),
:mod:`.stopping`, :mod:`.log_prefix` (``[actor=...]`` on records logged in actors),
:mod:`.logs` (a worker's ``sys.stdout``/``sys.stderr``, the level actor),
:mod:`.log_sink` (the controller's printing and aggregation).  Uses the
floors below (base, cast, model).
"""
