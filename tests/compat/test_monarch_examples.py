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
BLOBS = {"ping_pong.py": "0fa0561172e487089d476cf2a4ca4336916416a0"}

PING_PONG = (
    [f"Identity: {r}, msg='hey there, from script!!'" for r in range(4)]
    + [f"Identity: {r}, msg=\"Here's an arbitrary unique value: {r}\"" for r in range(4)]
    + [f"Pong!, Receiver ({b}:{r}) received msg Sender ({a}:{r}) msg='Ping'"
       for a, b in (("actor_0", "actor_1"), ("actor_1", "actor_0")) for r in range(2)]
    + ["Example completed successfully!"]
)

_PREFIX = re.compile(r"^\[[^\]]*\] ")     # monarch_cy's "[actor rank] " on worker lines


def _git_blob(path: str) -> str:
    with open(path, "rb") as f:
        data = f.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.mark.parametrize("name", sorted(BLOBS))
def test_example_is_unchanged(name):
    assert _git_blob(os.path.join(EXAMPLES, name)) == BLOBS[name], (
        f"monarch_examples/{name} differs from Monarch's; these files are kept "
        "byte for byte (see monarch_examples/README.md)")


@pytest.mark.timeout(150)
def test_ping_pong(tmp_path):
    path = os.path.join(EXAMPLES, "ping_pong.py")
    old = os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + ([old] if old else [])))
    r = subprocess.run([sys.executable, "-m", "monarch_cy.compat", path],
                       capture_output=True, text=True, timeout=120, env=env,
                       cwd=str(tmp_path))
    assert r.returncode == 0, f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    lines = [_PREFIX.sub("", line) for line in r.stdout.splitlines()]
    missing = [want for want in PING_PONG if want not in lines]
    assert not missing, f"missing lines {missing}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert lines.count("Example completed successfully!") == 1
    assert "Traceback" not in r.stderr, r.stderr
