"""``unhandled_fault_hook``: exactly once per unhandled failure, and at exit for a
failure nobody handled yet (each in a fresh controller process)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)

PROGRAM = '''
import os, signal, sys, time
import monarch_cy.actor as A
from monarch_cy.actor import Actor, endpoint, this_host

def hook(failure):
    name, uid = failure.mesh_name.rsplit("-", 1)      # Monarch's "<name>-<id>"
    assert len(uid) == 11, failure.mesh_name
    # one write per line: hooks for two failures may run at once (threads of their own)
    sys.stdout.write(f"HOOK {failure.kind} {name} {failure.ranks}\\n")
    sys.stdout.flush()
A.unhandled_fault_hook = hook

class X(Actor):
    @endpoint
    def pid(self):
        return os.getpid()

    @endpoint
    def boom(self):
        raise SystemExit(3)

pm = this_host().spawn_procs(per_host={"procs": 3})
m = pm.spawn("x", X)
pm.spawn("y", X)                   # a second actor mesh on the same procs
pids = m.pid.call().get(20).values()
os.kill(pids[0], signal.SIGKILL)   # a proc failure nobody sees
time.sleep(2.5)
print("after proc failure", flush=True)
m.slice(procs=1).boom.broadcast()  # an actor failure nobody sees
time.sleep(2.5)
print("after actor failure", flush=True)
if sys.argv[1] == "exit":
    os.kill(pids[2], signal.SIGKILL)
    time.sleep(0.05)
    print("exiting", flush=True)
'''


def _run(tmp_path, mode):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = subprocess.run([sys.executable, str(prog), mode], capture_output=True,
                         text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    return [ln for ln in out.stdout.splitlines() if not ln.startswith("[")]


def test_hook_once_per_failure(tmp_path):
    """A proc's death: once per actor mesh on it (as Monarch's); an actor's failure:
    once."""
    lines = _run(tmp_path, "stay")
    assert lines == ["HOOK proc x (0,)", "HOOK proc y (0,)", "after proc failure",
                     "HOOK actor x (1,)", "after actor failure"], lines


def test_hook_runs_for_a_failure_found_at_exit(tmp_path):
    lines = _run(tmp_path, "exit")
    assert lines[-3:] == ["exiting", "HOOK proc x (2,)", "HOOK proc y (2,)"], lines
    assert lines.count("HOOK proc x (2,)") == 1
