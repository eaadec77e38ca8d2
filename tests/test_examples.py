"""Every script in examples/ runs to completion and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = {
    "ping_pong.py": "the ball was hit 200 times",
    "parameter_server.py": "summing to [524288.0]",
    "ddp.py": "replicas identical",
    "supervision.py": "recovered",
}


@pytest.mark.parametrize("script", sorted(CASES))
def test_example_runs(script):
    path = os.path.join(ROOT, "examples", script)
    if not os.path.exists(path):
        pytest.fail(f"examples/{script} is missing")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    # As a user runs it: with Monarch's fault-hook rule, not the suite's opt-in
    # (tests/conftest.py), so an example that handles failures must opt in itself.
    env.pop("MONARCH_CY_FAULT_HOOK_SKIPS_SEEN", None)
    r = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert r.returncode == 0, f"stdout:\n{r.stdout[-2000:]}\nstderr:\n{r.stderr[-3000:]}"
    assert CASES[script] in r.stdout
    assert "Traceback" not in r.stderr
