"""The mesh admin (monarch_cy._hosts.mesh_admin, Monarch's _spawn_admin): an HTTP
endpoint in this process describing host meshes, bound where the configuration says."""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

from monarch_cy._hosts.mesh_admin import spawn_admin
from monarch_cy.actor import this_host
from monarch_cy.config import configured


def test_bound_where_configured_and_serves_the_meshes():
    with configured(mesh_admin_addr="127.0.0.1:0"):
        url, ref = spawn_admin([this_host()], telemetry_url="http://t").get(10)
    try:
        port = int(url.rsplit(":", 1)[1])
        assert port not in (0, 1729) and os.environ["MONARCH_ADMIN_URL"] == url
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            doc = json.loads(r.read())
        assert doc == {"host_meshes": [{"sizes": {}, "hosts": "this host"}],
                       "telemetry_url": "http://t"}
    finally:
        ref.stop()
        ref.stop()                                 # idempotent
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="at least one HostMesh"):
        spawn_admin([])
    with pytest.raises(ValueError, match="'nohost' must look like 'HOST:PORT'"):
        spawn_admin([this_host()], admin_addr="nohost")
    url, ref = spawn_admin([this_host()], admin_addr="127.0.0.1:0").get(10)
    try:
        taken = url.rsplit(":", 1)[1]
        with pytest.raises(OSError, match=f"cannot start the mesh admin on 127.0.0.1:{taken}"):
            spawn_admin([this_host()], admin_addr=f"127.0.0.1:{taken}").get(10)
    finally:
        ref.stop()
