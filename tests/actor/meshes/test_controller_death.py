"""If the controller dies (even SIGKILL), its procs and fork server exit too."""

import os
import subprocess
import sys
import time

import pytest

from _paths import ACTOR_TESTS, ROOT  # noqa: F401

SCRIPT = r"""
import os, signal, sys
sys.path.insert(0, %r)
from monarch_cy.actor import this_host
from _actors import Echo
pm = this_host().spawn_procs(per_host={"gpus": 3})
m = pm.spawn("e", Echo)
pids = [w[4] for w in m.whoami.call().get(30).values()]
from monarch_cy._actor.launch import launcher
z = launcher._zygote.popen.pid if launcher._zygote else None
print(" ".join(map(str, pids + ([z] if z else []))), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_procs_exit_when_controller_is_killed():
    here = ACTOR_TESTS
    out = subprocess.run([sys.executable, "-c", SCRIPT % here], capture_output=True,
                         text=True, timeout=60)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) >= 3, out.stderr
    end = time.monotonic() + 5
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "procs outlived their controller"


LEFT_BEHIND = r"""
import os, signal, sys
sys.path.insert(0, %r)
from monarch_cy.actor import this_host, this_proc
from _actors import Echo
mode = sys.argv[1]
if mode == "this_proc":
    m = this_proc().spawn("e", Echo)
    m.ping.call_one(1).get(30)
    pids = []
else:
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    m = pm.spawn("e", Echo)
    pids = [w[4] for w in m.whoami.call().get(30).values()]
from monarch_cy._actor.base.state import get_node
rundir = get_node().rundir
assert os.listdir(rundir), "expected sockets in the run directory"
print(rundir, " ".join(map(str, pids)), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("mode,env", [("procs", {"MONARCH_CY_START": "exec"}),
                                      ("procs", {"MONARCH_CY_START": "fork"}),
                                      ("this_proc", {})])
def test_nothing_left_behind_after_controller_sigkill(mode, env):
    here = ACTOR_TESTS
    out = subprocess.run([sys.executable, "-c", LEFT_BEHIND % here, mode],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, **env})
    words = out.stdout.split()
    assert words, out.stderr
    rundir, pids = words[0], [int(p) for p in words[1:]]
    end = time.monotonic() + 5
    while time.monotonic() < end and (os.path.exists(rundir) or
                                      any(_alive(p) for p in pids)):
        time.sleep(0.05)
    assert not os.path.exists(rundir), f"{rundir} left behind: {os.listdir(rundir)}"
    assert not [p for p in pids if _alive(p)], "procs outlived their controller"
