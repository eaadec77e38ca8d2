"""Plain async endpoints run one at a time; @concurrent_endpoint ones overlap."""

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

import asyncio  # noqa: E402

from monarch.actor import Actor, concurrent_endpoint, endpoint, this_host  # noqa: E402


class A(Actor):
    def __init__(self):
        self.log = []

    @endpoint
    async def plain(self, i):
        self.log.append(f"start {i}")
        await asyncio.sleep(0.1)
        self.log.append(f"end {i}")

    @concurrent_endpoint
    async def overlapping(self, i):
        self.log.append(f"start {i}")
        await asyncio.sleep(0.1)
        self.log.append(f"end {i}")

    @endpoint
    async def take_log(self):
        log, self.log = self.log, []
        return log


pm = this_host().spawn_procs(per_host={"gpus": 1})
a = pm.spawn("a", A)
for name in ("plain", "overlapping"):
    futs = [getattr(a, name).call_one(i) for i in range(3)]
    for f in futs:
        f.get(timeout=30)
    obs(name, a.take_log.call_one().get(timeout=30))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
