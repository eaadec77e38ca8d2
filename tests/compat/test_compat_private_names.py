"""Names of Monarch's private and native modules that its test suite and libraries
use, provided for real under compat: ``_client_context``, the proc mesh spawn
callbacks, ``_parse_torchrun``, ``BindSpec``, ``RdmaInitError`` and
``EndpointProperty._explicit_response_port``."""

from __future__ import annotations

import importlib

import pytest

import monarch_cy.compat as compat
import monarch_cy.rdma
from monarch_cy._actor.meshes import spawn_hooks
from monarch_cy._config_transport import BindSpec
from monarch_cy._hosts.spmd_job import parse_torchrun
from monarch_cy.actor import Actor, Port, concurrent_endpoint, endpoint, this_host


@pytest.fixture()
def on():
    compat.uninstall()
    compat.install()
    yield
    compat.uninstall()


def _name(path, name):
    return getattr(importlib.import_module(path), name)


def test_the_names_resolve_to_monarch_cys(on):
    pm = "monarch._src.actor.proc_mesh"
    assert _name(pm, "register_proc_mesh_spawn_callback") is \
        spawn_hooks.register_proc_mesh_spawn_callback
    assert _name(pm, "unregister_proc_mesh_spawn_callback") is \
        spawn_hooks.unregister_proc_mesh_spawn_callback
    assert _name("monarch._src.job.spmd", "_parse_torchrun") is parse_torchrun
    assert _name("monarch._rust_bindings.monarch_hyperactor.channel", "BindSpec") is BindSpec
    assert _name("monarch._rust_bindings.rdma", "RdmaInitError") is \
        monarch_cy.rdma.RdmaInitError
    roles = [{"entrypoint": "workspace/entrypoint.sh",
              "args": ["torchrun", "--nnodes=2", "--nproc-per-node=8", "-m", "train"]}]
    assert parse_torchrun(roles) == (["-m", "train"], 8)


class Probe(Actor):
    @endpoint
    async def client_here(self):
        from monarch._src.actor.actor_mesh import _client_context
        return _client_context._val is not None


def test_client_context_exists_in_the_controller_only(on):
    from monarch._src.actor.actor_mesh import _client_context
    pm = this_host().spawn_procs(per_host={"procs": 1})
    try:
        assert _client_context._val is not None        # spawn_procs used the context
        assert _client_context._val.actor_instance.actor_id == "client[0]"
        # an actor's process never makes a client (Monarch's test of port decoding)
        assert pm.spawn("probe", Probe).client_here.call_one().get(30) is False
    finally:
        pm.stop().get(30)


class Flags(Actor):
    @concurrent_endpoint
    async def conc(self):
        return 1

    @concurrent_endpoint(explicit_response_port=True)
    async def conc_port(self, port: Port):
        port.send(1)

    @endpoint(explicit_response_port=True)
    async def port(self, port: Port):
        port.send(1)

    @endpoint
    async def plain(self):
        return 1


def test_explicit_response_port_flag():
    assert Flags.conc._explicit_response_port and Flags.conc_port._explicit_response_port
    assert Flags.port._explicit_response_port
    assert not Flags.plain._explicit_response_port
