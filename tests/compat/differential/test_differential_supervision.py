"""Differential scenarios of supervision across processes and of actor lifecycles
(issue 40): each runs on torchmonarch 0.7.0 and on monarch_cy and the records must be
equal (see harness.py; a scenario that disagrees is a strict xfail with the reason)."""

from __future__ import annotations

import pytest

import harness  # on the path: conftest.py

pytestmark = pytest.mark.timeout(300)

SCENARIOS = [
    pytest.param("supervise_remote.py", ("true",), id="supervise_remote-handled"),
    pytest.param("supervise_remote.py", ("false",), id="supervise_remote-unhandled"),
    pytest.param("supervise_remote.py", ("raise",), id="supervise_remote-raises"),
    pytest.param("init_forever.py", (), id="init_forever"),
    pytest.param("bootstrap_failure.py", (), id="bootstrap_failure"),
    pytest.param("spawn_after_failure.py", (), id="spawn_after_failure"),
    pytest.param("cancel_before_cleanup.py", (), id="cancel_before_cleanup"),
    pytest.param("abort_no_reason.py", (), id="abort_no_reason"),
    pytest.param("spawn_procs_in_endpoint.py", (), id="spawn_procs_in_endpoint"),
]



@pytest.mark.parametrize("scenario,args", SCENARIOS)
def test_scenario(reference, scenario, args):
    harness.assert_agree(scenario, args)
