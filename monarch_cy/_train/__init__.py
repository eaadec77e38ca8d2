"""Private implementation of ``monarch-cy train`` (see :mod:`monarch_cy.train`).

* :mod:`.config` — the job's options, validated, and the fault-injection specs.
* :mod:`.data` — training data made on the spot, deterministically.
* :mod:`.model` — a small GPT-style character model with flat parameter buffers.
* :mod:`.worker` — the trainer actor: one data-parallel replica per proc.
* :mod:`.controller` — the controller side: spawn, step, survive, report.
* :mod:`.recovery` — bringing a run back after replicas died.
* :mod:`.report` — progress, the JSON summary and the PNG plot.
* :mod:`.cli` — ``monarch-cy train`` argument parsing and the printed summary.
"""
