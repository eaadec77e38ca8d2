"""The zmq transports: tcp:// (as between hosts; large buffers travel as zero-copy
frames) and ipc:// (zmq on one host, MONARCH_CY_TRANSPORT=ipc)."""

import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import sys
sys.path.insert(0, %r)
import numpy as np
from monarch_cy.actor import this_host
from _actors import Echo
pm = this_host().spawn_procs(per_host={"gpus": 2})
m = pm.spawn("t", Echo)
assert pm._procs[0].key.startswith(sys.argv[1]), pm._procs[0].key
a = np.arange(1 << 20, dtype=np.float32)
assert m.checksum.call(a).get(30).values() == [float(a.sum())] * 2
r = m.slice(gpus=1).make_array.call_one(3 << 20, 5).get(30)
assert r.nbytes == 3 << 20 and r[0] == 5 and r[-1] == 5
print("zmq-ok", m.ping.call(1).get(10).values(), "zmq" in sys.modules)
pm.stop().get(10)
"""


@pytest.mark.parametrize("transport, prefix", [("tcp", "tcp://127.0.0.1:"), ("ipc", "ipc://")])
def test_zmq_transport_end_to_end(transport, prefix):
    env = dict(os.environ, MONARCH_CY_TRANSPORT=transport)
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", SCRIPT % here, prefix], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "zmq-ok [1, 1] True" in out.stdout


def test_unix_transport_needs_no_zmq():
    """The default transport: neither the controller nor its procs import zmq."""
    env = dict(os.environ)
    env.pop("MONARCH_CY_TRANSPORT", None)
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys; sys.path.insert(0, {here!r})\n"
            "from monarch_cy.actor import this_host\n"
            "from _actors import Echo\n"
            "pm = this_host().spawn_procs(per_host={'gpus': 2})\n"
            "m = pm.spawn('t', Echo)\n"
            "print('workers', m.has_module.call('zmq').get(30).values(), "
            "'controller', 'zmq' in sys.modules)\n"
            "pm.stop().get(10)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "workers [False, False] controller False" in out.stdout, out.stdout
