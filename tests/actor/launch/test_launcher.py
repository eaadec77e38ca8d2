"""Starting procs (monarch_cy._actor.launch.launcher): the fork server is not a single
point of failure, and both start modes give procs the environment they asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from _paths import ACTOR_TESTS

FORK_SERVER_KILLED = r"""
import os, signal, sys, time
sys.path.insert(0, %r)
from monarch_cy.actor import SupervisionError, this_host
from monarch_cy._actor.launch import launcher
from _actors import Echo
pm = this_host().spawn_procs(per_host={"gpus": 2})
m = pm.spawn("e", Echo)
assert m.ping.call(1).get(30).values() == [1, 1]
z = launcher._zygote.popen.pid
os.kill(z, signal.SIGKILL)
# Its workers go with it (they cannot be watched any more): calls fail, none hangs.
# Each rank's death is noticed on its own: wait for both before respawning.
end = time.monotonic() + 20
for g in (0, 1):
    while True:
        try:
            m.slice(gpus=g).ping.call_one(2).get(10)
        except SupervisionError:
            break
        assert time.monotonic() < end, f"rank {g}: the fork server's death was never noticed"
        time.sleep(0.05)
# Procs are still spawnable: a respawn and a new mesh use a new fork server.
assert sorted(pm.respawn().get(60)) == [0, 1]
assert m.ping.call(3).get(30).values() == [3, 3]
assert launcher._zygote.popen.pid != z
pm2 = this_host().spawn_procs(per_host={"gpus": 2})
assert pm2.spawn("e2", Echo).ping.call(4).get(30).values() == [4, 4]
pm2.stop().get(10)
pm.stop().get(10)
print("ok", flush=True)
"""


def test_procs_are_spawnable_after_the_fork_server_is_killed():
    here = ACTOR_TESTS
    out = subprocess.run([sys.executable, "-c", FORK_SERVER_KILLED % here],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MONARCH_CY_START": "fork"})
    assert out.returncode == 0 and out.stdout.split()[:1] == ["ok"], \
        out.stdout + out.stderr[-3000:]


EXIT_AFTER_DEATH = r"""
import json, os, signal, sys, time
sys.path.insert(0, %r)
from monarch_cy.actor import this_host
from monarch_cy._actor.launch import launcher
from _actors import Echo
pm = this_host().spawn_procs(per_host={"gpus": 2})
m = pm.spawn("e", Echo)
assert m.ping.call(1).get(30).values() == [1, 1]
seen = {}
real_exit = launcher.ProcHandle._exit
def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"
def record(self, code):
    seen[self.pid] = state(self.pid)
    real_exit(self, code)
launcher.ProcHandle._exit = record
pids = [p.popen.pid for p in pm._state.procs]
os.kill(launcher._zygote.popen.pid, signal.SIGKILL)
end = time.monotonic() + 20
while len(seen) < 2 and time.monotonic() < end:
    time.sleep(0.01)
print("states", json.dumps([seen.get(p, "never") for p in pids]), flush=True)
"""


def test_a_lost_fork_servers_workers_are_reported_exited_only_once_gone():
    """Reported before it is gone, a dying worker still accepts connections on its
    inbox, and a respawn that reached it there would lose its SPAWN (seen in CI)."""
    here = ACTOR_TESTS
    out = subprocess.run([sys.executable, "-c", EXIT_AFTER_DEATH % here],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MONARCH_CY_START": "fork"})
    assert out.returncode == 0, out.stderr[-3000:]
    states = out.stdout.split("states ", 1)[1].strip()
    assert all(s in ("Z", "gone") for s in json.loads(states)), states


@pytest.mark.parametrize("mode", ["fork", "exec"])
def test_start_modes_give_the_same_environment(mode):
    code = r"""
import json, sys
sys.path.insert(0, %r)
from monarch_cy.actor import this_host
from _actors import Victim
pm = this_host().spawn_procs(per_host={"gpus": 2}, env={"MY_VAR": "x"})
m = pm.spawn("e", Victim, "/dev/null")
print(json.dumps([m.slice(gpus=g).env.call_one(k).get(30)
                  for g in (0, 1) for k in ("MY_VAR", "MONARCH_CY_RANK")]))
pm.stop().get(10)
""" % ACTOR_TESTS
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "MONARCH_CY_START": mode})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("\n")[-2] == '["x", "0", "x", "1"]', out.stdout
