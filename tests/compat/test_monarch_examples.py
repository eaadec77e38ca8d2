"""Monarch's own examples, unchanged (see monarch_examples/README.md), run on
monarch_cy through ``python -m monarch_cy.compat``."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "monarch_examples")

# file -> git blob id of the copied file (its README's table)
BLOBS = {"ping_pong.py": "0fa0561172e487089d476cf2a4ca4336916416a0",
         "grpo_yield.py": "41e8fee9563a8790a6aadb178957c6c8e13605ac",
         "grpo_actor.py": "a1c2de9aad34d35225238a636c1b0306037f5882",
         "debugging.py": "11c7ed6893240174f5954464efd1d40d6add6867"}     # driven through a terminal: tests/debug

PING_PONG = (
    [f"Identity: {r}, msg='hey there, from script!!'" for r in range(4)]
    + [f"Identity: {r}, msg=\"Here's an arbitrary unique value: {r}\"" for r in range(4)]
    + [f"Pong!, Receiver ({b}:{r}) received msg Sender ({a}:{r}) msg='Ping'"
       for a, b in (("actor_0", "actor_1"), ("actor_1", "actor_0")) for r in range(2)]
    + ["Example completed successfully!"]
)

_PREFIX = re.compile(r"^\[[^\]]*\] \[\d+\] ")   # monarch_cy's "[actor] [rank] " on worker lines


def _git_blob(path: str) -> str:
    with open(path, "rb") as f:
        data = f.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.mark.parametrize("name", sorted(BLOBS))
def test_example_is_unchanged(name):
    assert _git_blob(os.path.join(EXAMPLES, name)) == BLOBS[name], (
        f"monarch_examples/{name} differs from Monarch's; these files are kept "
        "byte for byte (see monarch_examples/README.md)")


def run_example(name: str, cwd, timeout: float) -> subprocess.CompletedProcess:
    """``python -m monarch_cy.compat monarch_examples/<name>`` in ``cwd``."""
    path = os.path.join(EXAMPLES, name)
    old = os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + ([old] if old else [])))
    return subprocess.run([sys.executable, "-m", "monarch_cy.compat", path],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=str(cwd))


@pytest.mark.timeout(150)
def test_grpo_yield(tmp_path):
    """Channels, ports in constructors, send(selection="choose"), async __cleanup__,
    awaited stops: Monarch's GRPO example built on yields (CPU torch only)."""
    pytest.importorskip("torch")
    r = run_example("grpo_yield.py", tmp_path, 140)
    assert r.returncode == 0, f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    lines = [_PREFIX.sub("", line) for line in r.stdout.splitlines()]
    steps = [ln for ln in lines if ln.startswith("[trainer] step ")]
    assert [s.split()[2] for s in steps] == [f"{i:02d}" for i in range(20)], r.stdout[-3000:]
    assert "[controller] training complete at step 20" in r.stdout.splitlines()
    assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.timeout(150)
def test_ping_pong(tmp_path):
    r = run_example("ping_pong.py", tmp_path, 120)
    assert r.returncode == 0, f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    lines = [_PREFIX.sub("", line) for line in r.stdout.splitlines()]
    missing = [want for want in PING_PONG if want not in lines]
    assert not missing, f"missing lines {missing}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert lines.count("Example completed successfully!") == 1
    assert "Traceback" not in r.stderr, r.stderr
