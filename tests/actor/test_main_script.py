"""Actor classes defined in the controller's ``__main__`` script work in workers."""

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


def test_actor_class_in_main_script(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert "['hi 3 from __mp_main__', 'hi 3 from __mp_main__']" in out.stdout
