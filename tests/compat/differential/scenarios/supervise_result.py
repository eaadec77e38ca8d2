"""An actor owns a child mesh whose actor fails; the owner's __supervise__ returns True,
returns False or raises (argv[1]); the client records what reaches it."""
import sys
import time

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

import asyncio  # noqa: E402

from monarch.actor import Actor, endpoint, this_host, this_proc  # noqa: E402

MODE = sys.argv[1]


class Fatal(SystemExit):
    pass


class Child(Actor):
    @endpoint
    async def die(self):
        raise Fatal("fatal")


class Parent(Actor):
    def __init__(self, mode):
        self.mode = mode
        self.calls = 0

    def __supervise__(self, failure):
        self.calls += 1
        if self.mode == "raise":
            raise RuntimeError("supervise raised")
        return self.mode == "true"

    @endpoint
    async def start(self):
        self.child = this_proc().spawn("child", Child)
        self.child.die.broadcast()
        return "sent"

    @endpoint
    async def calls_seen(self):
        return self.calls

    @endpoint
    async def ping(self):
        return "parent alive"


pm = this_host().spawn_procs(per_host={"gpus": 1})
p = pm.spawn("parent", Parent, MODE)
step("start", lambda: p.start.call_one().get(timeout=30))
if MODE == "true":
    wait_until(lambda: p.calls_seen.call_one().get(timeout=10) > 0)
else:
    wait_until(lambda: hooked)
    time.sleep(0.5)
obs("client_hook_calls_after_wait", len(hooked))
step("supervise_calls", lambda: p.calls_seen.call_one().get(timeout=10))
step("parent_after", lambda: p.ping.call_one().get(timeout=10))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
