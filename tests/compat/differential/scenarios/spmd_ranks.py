"""SPMDActor.setup_env on a mesh of 2 (simulated) hosts x 2 gpus on one machine: the
torchrun variables each rank gets (Monarch's last-dimension rule)."""

import os

from _obs import obs  # noqa: E402

from monarch.actor import Actor, endpoint, this_host  # noqa: E402
from monarch.spmd import SPMDActor  # noqa: E402

NAMES = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]


class Env(Actor):
    @endpoint
    async def get(self):
        return {n: os.environ.get(n, "") for n in NAMES}


pm = this_host().spawn_procs(per_host={"hosts": 2, "gpus": 2})
pm.spawn("spmd", SPMDActor).setup_env.call("localhost", 29500).get(timeout=60)
for point, env in pm.spawn("env", Env).get.call().get(timeout=60).items():
    obs(f"hosts={point['hosts']},gpus={point['gpus']}", env)
pm.stop().get(timeout=60)
