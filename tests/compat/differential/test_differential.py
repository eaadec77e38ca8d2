"""Differential tests: each scenario runs on torchmonarch 0.7.0 (the reference venv) and on
monarch_cy (under compat) at the same time, and their normalized records must be equal.

A scenario that disagrees today is ``xfail(strict=True)`` with the difference seen, so
it fails loudly the day it starts agreeing (then drop the mark).  See harness.py for the
record and the normalization rules, and docs/monarch-compat.md, "Differential tests".
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

pytestmark = pytest.mark.timeout(300)

ISSUE = "issue 34 item 1"


def _disagrees(reason: str):
    return pytest.mark.xfail(strict=True, reason=f"{reason}; {ISSUE}")


# What the default hook prints, and the exception that ends the main thread.
FAULT_HOOK_STDERR = (r"^Unhandled monarch error", r"^(KeyboardInterrupt|SystemExit|\w+Error)\b")

SCENARIOS = [
    pytest.param("endpoint_exception.py", (), (), id="endpoint_exception", marks=_disagrees(
        "first line 'Actor call a[1].boom failed. (the exception could not be pickled; ...)' "
        "where Monarch says 'Actor call a.boom failed.'; an exception class defined in "
        "__main__ does not come back (.exception is None, Monarch: Oops('whole mesh'))")),
    pytest.param("base_exception.py", ("systemexit",), (), id="base_exception-SystemExit",
                 marks=_disagrees(
        "caller's SupervisionError text 'The actor child[0] and all its descendants have "
        "failed: endpoint die raised Fatal: fatal' where Monarch says 'Endpoint call "
        "child.die() failed, The actor <root>.<__main__.Parent parent{...}>.<__main__.Child "
        "child> ...: actor explicitly aborted due to: <traceback>'; MeshFailure.mesh_name "
        "'child' (Monarch: 'child-<random id>'), other str() and report() texts")),
    pytest.param("base_exception.py", ("keyboardinterrupt",), (),
                 id="base_exception-KeyboardInterrupt", marks=_disagrees(
        "as base_exception-SystemExit: the SupervisionError and MeshFailure texts and "
        "mesh_name differ; the outcome (actor fails, owner's __supervise__ runs once, "
        "the owner lives on) agrees")),
    pytest.param("proc_death.py", (), (), id="proc_death-exit-segv-kill", marks=_disagrees(
        "SupervisionError first line 'The actor a_exit[1] and all its descendants have "
        "failed:' (Monarch: 'Endpoint call a_exit.die() failed, The actor <root>.<__main__.A "
        "a_exit{'gpus': 1/2}> ...') and cause lines ('the process this actor was running on "
        "exited with non-zero code 1', 'failed: Killed(sig=11)'); spawning on the mesh "
        "after a proc died raises SupervisionError 'The actor b[1] ...: cannot spawn: ...' "
        "at once where Monarch's hangs (TimeoutError); the client's unhandled_fault_hook "
        "is never called where Monarch's gets 6 failures (a_exit, a_segv, a_kill and its "
        "logger mesh of each) although every caller saw the error")),
    pytest.param("fault_hook_default.py", (), FAULT_HOOK_STDERR, id="fault_hook_default",
                 marks=_disagrees(
        "with the default unhandled_fault_hook, a dead proc whose caller got the error "
        "does not end the program: exit 0, nothing printed, main thread undisturbed; "
        "Monarch prints 'Unhandled monarch error on the root actor, hostname=..., PID=... "
        "at time ...:' and raises KeyboardInterrupt in the main thread (exit by SIGINT)")),
    pytest.param("supervise_result.py", ("true",), (), id="supervise_returns_true"),
    pytest.param("supervise_result.py", ("false",), (), id="supervise_returns_false",
                 marks=_disagrees(
        "outcome agrees (parent fails, client hook runs) but the texts differ: 'The actor "
        "parent[0] and all its descendants have failed:' vs Monarch's 'Endpoint call "
        "parent.calls_seen() failed, The actor <root>...<__main__.Child child> ...'; "
        "Monarch's hook is also called for each later call to the dead parent "
        "(undeliverable message, mesh_name '<none>'), monarch_cy's is not")),
    pytest.param("supervise_result.py", ("raise",), (), id="supervise_raises",
                 marks=_disagrees(
        "as supervise_returns_false; Monarch's texts add 'RuntimeError: supervise raised' "
        "and 'This error occurred while handling another failure:'")),
    pytest.param("dispatch_order.py", (), (), id="dispatch_order"),
    pytest.param("explicit_port.py", (), (), id="explicit_port", marks=_disagrees(
        "outcome agrees (an exception in an explicit-port endpoint fails the actor) but "
        "the texts differ ('The actor a[0] and all its descendants have failed:' vs "
        "'Endpoint call a.raises() failed, The actor <root>.<__main__.A a{...}> ...'), and "
        "Monarch's hook also sees each later call to the dead actor as undeliverable")),
    pytest.param("abort.py", (), (), id="abort", marks=_disagrees(
        "the abort itself agrees (the call returns its value, the actor fails, the client's "
        "hook runs); the hook's MeshFailure differs: mesh_name 'a' (Monarch: 'a-<random "
        "id>'), str 'actor mesh 'a' rank(s) 0 failed: actor explicitly aborted due to: "
        "giving up' (Monarch: 'MeshFailure(mesh_name=a-<id>, crashed_ranks=[0], "
        "event=Supervision event: actor <root>.<__main__.A a{'gpus': 0/1}> failed: ...')'; "
        "the later call's text differs and Monarch's hook is called again for it "
        "(undeliverable message)")),
    pytest.param("current_rank_slice.py", (), (), id="current_rank_slice", marks=_disagrees(
        "in an endpoint reached by choose(), current_rank() is {} with size {} where "
        "Monarch gives {'gpus': 0/1} with size {'gpus': 1}; slices agree")),
    pytest.param("stop_cleanup.py", (), (), id="stop_cleanup", marks=_disagrees(
        "ActorMesh.stop() resolves to None (Monarch: []); calls after stop raise "
        "MeshStoppedError 'The actor a[0] has status:' (Monarch: SupervisionError "
        "'Endpoint call a.ok() failed, Supervision event: actor ... has status:'); spawn "
        "after ProcMesh.stop() raises MeshStoppedError (Monarch: RuntimeError '`ProcMesh` "
        "has already been stopped'); a worker's module global __del__ does not run when "
        "its proc mesh stops (Monarch: it runs); Monarch's hook sees the call after stop "
        "as undeliverable")),
    pytest.param("mesh_text.py", (), (), id="mesh_text", marks=_disagrees(
        "ValueMesh.get(9) raises MeshIndexError 'rank 9 is out of range for a mesh of 4 "
        "values' (Monarch: ValueError 'index 9 out of range (len=4)'); item() errors are "
        "MeshIndexError with other texts (Monarch: KeyError \"'y'\", KeyError \"item has "
        "extra dimensions: ['z']\", IndexError 'rank 10 not in current shape'); a sliced "
        "ValueMesh of 2 values prints on two lines (Monarch: one); Extent/Point text agrees")),
]


@pytest.fixture(scope="session")
def reference():
    why = harness.reference_unavailable()
    if why:
        pytest.skip(why)


@pytest.mark.parametrize("scenario,args,stderr_patterns", SCENARIOS)
def test_scenario(reference, scenario, args, stderr_patterns):
    diffs, ref, cy, raw = harness.run_scenario(scenario, args, stderr_patterns=stderr_patterns)
    assert not diffs, harness.report(scenario, args, diffs, ref, cy, raw)
