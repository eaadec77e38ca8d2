"""SPMDActor's torchrun variables follow Monarch's rule: the mesh's last dimension is
one node's procs, whatever the machines are (``setup_env``; ``main`` sets the same)."""

from __future__ import annotations

import os

import monarch_cy.actor as api
from monarch_cy.actor import this_host
from monarch_cy.spmd import SPMDActor

NAMES = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]


class Env(api.Actor):
    @api.endpoint
    def get(self):
        return [os.environ.get(n) for n in NAMES]


def _expect(rank, world, per_node, addr="127.0.0.1", port="29511"):
    return [str(rank), str(world), str(rank % per_node), str(per_node),
            str(rank // per_node), str((world + per_node - 1) // per_node), str(rank),
            str(world), addr, port]


def test_two_simulated_hosts_on_one_machine():
    pm = this_host().spawn_procs(per_host={"hosts": 2, "gpus": 3})
    try:
        spmd = pm.spawn("_SPMDActor", SPMDActor)
        spmd.setup_env.call("127.0.0.1", 29511).get(60)
        got = pm.spawn("env", Env).get.call().get(60)
        for point, env in got.items():
            rank = point["hosts"] * 3 + point["gpus"]
            assert env == _expect(rank, 6, 3), (point, env)
    finally:
        pm.stop().get(30)


def test_a_slice_is_its_own_world():
    pm = this_host().spawn_procs(per_host={"gpus": 4})
    try:
        part = pm.slice(gpus=slice(1, 3))
        part.spawn("_SPMDActor", SPMDActor).setup_env.call("127.0.0.1", 29511).get(60)
        got = list(part.spawn("env", Env).get.call().get(60).values())
        assert got == [_expect(0, 2, 2), _expect(1, 2, 2)]
    finally:
        pm.stop().get(30)
