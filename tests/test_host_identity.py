"""One host identity (``monarch_cy._host_identity``) for every same-host decision.

The collectives' mesh setup (one host? which ranks are local?) and RDMA buffer
handles (ipc/cma or a remote backend?) compare host ids between processes, so the
processes of one host must produce the same id from either user, and the fake
hosts of the netns tests (own hostname, shared kernel) must produce different ids.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from monarch_cy import _host_identity as H

ROOT = Path(__file__).resolve().parents[1]

# What a process reports as its host id through each user of the concept.
_PROBE = """
import json
from monarch_cy._collectives._mesh import GroupAgent
from monarch_cy._rdma_buffer import _identity
from monarch_cy import _host_identity
agent = GroupAgent.__new__(GroupAgent)        # info() is a plain call inside the actor
print(json.dumps({"mesh": agent.info()["host"], "rdma": _identity.host_id(),
                  "home": _host_identity.host_id()}))
"""


def _probe(prefix=()) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([*prefix, sys.executable, "-c", _PROBE], capture_output=True, text=True,
                       timeout=120, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_format_is_hostname_bar_boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    assert H.host_id() == f"{socket.gethostname()}|{boot}"
    assert H.hostname_of(H.host_id()) == socket.gethostname()


def test_both_users_share_the_one_function():
    from monarch_cy._collectives import _mesh
    from monarch_cy._rdma_buffer import _identity

    assert _identity.host_id is H.host_id
    assert _mesh.host_id is H.host_id


def test_processes_of_one_host_agree_through_either_user():
    """Two fresh processes (as two procs of a job) report one id, from the mesh
    agent's info() and from the RDMA side alike, equal to this process's."""
    a, b = _probe(), _probe()
    assert a == b
    assert set(a.values()) == {H.host_id()}


def test_rdma_handle_carries_the_same_id_as_the_mesh_agent():
    np = pytest.importorskip("numpy")
    from monarch_cy._collectives._mesh import GroupAgent
    from monarch_cy.rdma import RDMABuffer

    buf = RDMABuffer(np.zeros(16, dtype=np.uint8))
    try:
        assert buf._h.host == GroupAgent.__new__(GroupAgent).info()["host"] == H.host_id()
    finally:
        buf.drop().get(timeout=10)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare (a private UTS namespace, as netns fake hosts get)")
def test_a_fake_host_with_its_own_hostname_is_another_host():
    """As in monarch_cy._hosts.netns: same kernel (boot id), own hostname -> a different id,
    so RDMA between fake hosts uses tcp and groups across them are not 'one host'."""
    prefix = ["unshare", "--uts", "--", "sh", "-c", 'hostname mcy-fake-node0 && exec "$@"', "sh"]
    other = _probe(prefix)
    assert other["mesh"] == other["rdma"] == other["home"]
    assert H.hostname_of(other["home"]) == "mcy-fake-node0"
    assert other["home"] != H.host_id()
    assert other["home"].split("|", 1)[1] == H.host_id().split("|", 1)[1]


def test_hostname_is_read_at_each_call(monkeypatch):
    """A rename while a job runs changes every process's id at once (none keeps a stale one)."""
    monkeypatch.setattr(socket, "gethostname", lambda: "renamed-host")
    assert H.hostname_of(H.host_id()) == "renamed-host"


def test_unreadable_boot_id(monkeypatch, tmp_path):
    monkeypatch.setattr(H, "_BOOT_ID", str(tmp_path / "absent"))
    H._boot_id.cache_clear()
    try:
        assert H.host_id() == f"{socket.gethostname()}|{H.NO_BOOT_ID}"
    finally:
        monkeypatch.undo()
        H._boot_id.cache_clear()
    assert H.NO_BOOT_ID not in H.host_id()
