"""Differential tests: each scenario runs on torchmonarch 0.7.0 (the reference venv) and on
monarch_cy (under compat) at the same time, and their normalized records must be equal.

A scenario that disagrees today is ``xfail(strict=True)`` with the difference seen, so
it fails loudly the day it starts agreeing (then drop the mark).  See harness.py for the
record and the normalization rules, and docs/monarch-compat.md, "Differential tests".
"""

from __future__ import annotations

import pytest

import harness  # on the path: conftest.py

pytestmark = pytest.mark.timeout(300)

ISSUE = "issue 34 item 1"


def _disagrees(reason: str):
    return pytest.mark.xfail(strict=True, reason=f"{reason}; {ISSUE}")


# What the default hook prints, and the exception that ends the main thread.
FAULT_HOOK_STDERR = (r"^Unhandled monarch error", r"^(KeyboardInterrupt|SystemExit|\w+Error)\b")

SCENARIOS = [
    pytest.param("endpoint_exception.py", (), (), id="endpoint_exception"),
    pytest.param("base_exception.py", ("systemexit",), (), id="base_exception-SystemExit"),
    pytest.param("base_exception.py", ("keyboardinterrupt",), (),
                 id="base_exception-KeyboardInterrupt"),
    pytest.param("proc_death.py", (), (), id="proc_death-exit-segv-kill", marks=_disagrees(
        "the calls' texts and the hook's failures agree (one per actor mesh on the dead"
        " proc, named '<root>.<__main__.A a_exit{'gpus': 1/2}>', mesh_name "
        "'a_exit-<id>'), but for two things: Monarch's hook also gets one failure per "
        "dead proc for its internal logger mesh, which monarch_cy does not have; "
        "spawning on a dead proc raises SupervisionError at once where Monarch's hangs "
        "until the caller's timeout")),
    pytest.param("fault_hook_default.py", (), FAULT_HOOK_STDERR, id="fault_hook_default"),
    pytest.param("supervise_result.py", ("true",), (), id="supervise_returns_true"),
    pytest.param("supervise_result.py", ("false",), (), id="supervise_returns_false"),
    pytest.param("supervise_result.py", ("raise",), (), id="supervise_raises"),
    pytest.param("dispatch_order.py", (), (), id="dispatch_order"),
    pytest.param("explicit_port.py", (), (), id="explicit_port"),
    pytest.param("abort.py", (), (), id="abort"),
    pytest.param("undeliverable.py", (), (), id="undeliverable"),
    pytest.param("current_rank_slice.py", (), (), id="current_rank_slice"),
    pytest.param("stop_cleanup.py", (), (), id="stop_cleanup", marks=_disagrees(
        "__cleanup__ runs, the workers' interpreters finalize (a module global's "
        "__del__ runs) and the texts agree but for two things: calls after a stop "
        "raise MeshStoppedError, a subclass of SupervisionError (Monarch: "
        "SupervisionError itself), and after an actor mesh stop name the actor as "
        "'<root>.<__main__.A a{...}>' where Monarch prints its internal address")),
    pytest.param("mesh_text.py", (), (), id="mesh_text"),
    pytest.param("nested_stop.py", (), (), id="nested_stop", marks=_disagrees(
        "stopping a parent stops the mesh it spawned first (both __cleanup__s run) as "
        "in Monarch; a later call to the stopped child raises MeshStoppedError at "
        "once where Monarch's hangs until the caller's timeout")),
]



@pytest.mark.parametrize("scenario,args,stderr_patterns", SCENARIOS)
def test_scenario(reference, scenario, args, stderr_patterns):
    harness.assert_agree(scenario, args, stderr_patterns=stderr_patterns)
