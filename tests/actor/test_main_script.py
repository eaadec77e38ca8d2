"""Actor classes defined in the controller's ``__main__`` script work in workers: they
travel by value, and the workers never run the script."""

import os
import subprocess
import sys

SCRIPT = '''
from monarch_cy.actor import Actor, endpoint, this_host

class Local(Actor):
    @endpoint
    def hi(self, x):
        return f"hi {x} from {__name__}"

if __name__ == "__main__":
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    print(pm.spawn("l", Local).hi.call(3).get(30).values())
    pm.stop().get(10)
'''


def _run_script(tmp_path, text):
    path = tmp_path / "prog.py"
    path.write_text(text)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    return out


def test_actor_class_in_main_script(tmp_path):
    out = _run_script(tmp_path, SCRIPT)
    assert "['hi 3 from __main__', 'hi 3 from __main__']" in out.stdout


UNGUARDED = '''
import os
from monarch_cy.actor import Actor, endpoint, this_host
print("script body ran in", os.getpid(), flush=True)

class Local(Actor):
    @endpoint
    def pid(self):
        return os.getpid()

pm = this_host().spawn_procs(per_host={"procs": 2})
pids = pm.spawn("l", Local).pid.call().get(30).values()
print("workers", pids, flush=True)
pm.stop().get(10)
'''


def test_script_without_main_guard_runs_once(tmp_path):
    out = _run_script(tmp_path, UNGUARDED)
    assert out.stdout.count("script body ran in") == 1, out.stdout
    assert "workers [" in out.stdout
