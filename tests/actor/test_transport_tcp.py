"""The tcp:// transport (as between hosts): large buffers travel as zero-copy frames."""

import os
import subprocess
import sys

SCRIPT = r"""
import sys
sys.path.insert(0, %r)
import numpy as np
from monarch_cy.actor import this_host
from _actors import Echo
pm = this_host().spawn_procs(per_host={"gpus": 2})
m = pm.spawn("t", Echo)
assert pm._procs[0].key.startswith("tcp://127.0.0.1:")
a = np.arange(1 << 20, dtype=np.float32)
assert m.checksum.call(a).get(30).values() == [float(a.sum())] * 2
r = m.slice(gpus=1).make_array.call_one(3 << 20, 5).get(30)
assert r.nbytes == 3 << 20 and r[0] == 5 and r[-1] == 5
print("tcp-ok", m.ping.call(1).get(10).values())
pm.stop().get(10)
"""


def test_tcp_transport_end_to_end():
    env = dict(os.environ, MONARCH_CY_TRANSPORT="tcp")
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", SCRIPT % here], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "tcp-ok [1, 1]" in out.stdout
