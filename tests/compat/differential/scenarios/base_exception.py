"""An endpoint raises a BaseException that is not an Exception: the actor fails and
its owner's __supervise__ runs (the owner here is an actor)."""
import sys

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

import asyncio  # noqa: E402

from monarch.actor import Actor, endpoint, this_host, this_proc  # noqa: E402

KIND = sys.argv[1] if len(sys.argv) > 1 else "systemexit"


class Fatal(SystemExit):
    pass


class Interrupted(KeyboardInterrupt):
    pass


class Child(Actor):
    @endpoint
    async def die(self, kind):
        raise (Fatal("fatal") if kind == "systemexit" else Interrupted("interrupted"))

    @endpoint
    async def ok(self):
        return "child alive"


class Parent(Actor):
    def __init__(self):
        self.seen = []

    def __supervise__(self, failure):
        self.seen.append({"type": type(failure).__name__, "mesh_name": failure.mesh_name,
                          "str": str(failure),
                          "report_first_line": failure.report().splitlines()[0]})
        return True

    @endpoint
    async def start(self):
        self.child = this_proc().spawn("child", Child)
        return await self.child.ok.call_one()

    @endpoint
    async def poke(self, kind):
        try:
            await asyncio.wait_for(self.child.die.call_one(kind), 10)
            return "returned"
        except BaseException as e:  # noqa: B036
            return describe(e)

    @endpoint
    async def seen_failures(self):
        return self.seen

    @endpoint
    async def ping(self):
        return "parent alive"


pm = this_host().spawn_procs(per_host={"gpus": 1})
p = pm.spawn("parent", Parent)
step("start", lambda: p.start.call_one().get(timeout=30))
step("poke", lambda: p.poke.call_one(KIND).get(timeout=30))
seen = []


def poll():
    global seen
    seen = p.seen_failures.call_one().get(timeout=30)
    return seen


wait_until(poll)
obs("supervise_calls", seen)
step("parent_after", lambda: p.ping.call_one().get(timeout=30))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
