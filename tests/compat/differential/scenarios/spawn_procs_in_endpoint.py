"""this_host().spawn_procs() inside an async endpoint (the procs are started for the
actor, which owns them): it returns, and actors spawned there answer."""
import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, endpoint, this_host  # noqa: E402


class Leaf(Actor):
    @endpoint
    async def hello(self):
        return "leaf"


class Parent(Actor):
    @endpoint
    async def grow(self):
        procs = this_host().spawn_procs(per_host={"gpus": 2})
        leaves = procs.spawn("leaves", Leaf)
        values = [v for _, v in await leaves.hello.call()]
        await procs.stop()
        return values


pm = this_host().spawn_procs(per_host={"gpus": 1})
p = pm.spawn("parent", Parent)
step("grow", lambda: p.grow.call_one().get(timeout=60))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
