"""Supervision across processes: the client hands a proc mesh to an owner actor (on
procs of its own), the owner spawns a child mesh there, and the children fail with
nowhere to reply (broadcast).  The owner's __supervise__ returns True, False or raises
(argv[1]).  Handled: 2 children, and the owner's endpoint waits on its loop until
__supervise__ saw both (it runs meanwhile); else 1 child (which failure fails the
owner first would be a race) and the client waits for what reaches it."""
import sys

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

import asyncio  # noqa: E402
import re  # noqa: E402

from monarch.actor import Actor, endpoint, this_host  # noqa: E402

MODE = sys.argv[1]


class Fatal(BaseException):
    pass


class Child(Actor):
    @endpoint
    async def ok(self):
        return "child alive"

    @endpoint
    async def die(self):
        raise Fatal("child fatal")


class Owner(Actor):
    def __init__(self, procs, mode):
        self.child = procs.spawn("child", Child)
        self.mode = mode
        self.events = []
        self.seen = asyncio.Event()

    def __supervise__(self, failure):
        ranks = re.search(r"crashed_ranks=(\[[\d, ]*\])", str(failure))
        self.events.append({"mesh_name": failure.mesh_name,
                            "ranks": ranks.group(1) if ranks else None,
                            "report_first_line": failure.report().splitlines()[0]})
        self.seen.set()
        if self.mode == "raise":
            raise RuntimeError("supervise raised")
        return self.mode == "true"

    @endpoint
    async def fail_children(self, want):
        await self.child.ok.call()
        self.child.die.broadcast()
        if not want:
            return "sent"
        for _ in range(100):
            if len(self.events) >= want:
                break
            self.seen.clear()
            try:
                await asyncio.wait_for(self.seen.wait(), 0.3)
            except asyncio.TimeoutError:
                pass
        return sorted(self.events, key=lambda e: e["ranks"])

    @endpoint
    async def ping(self):
        return "owner alive"


owner_procs = this_host().spawn_procs(per_host={"gpus": 1})
child_procs = this_host().spawn_procs(per_host={"gpus": 2 if MODE == "true" else 1})
owner = owner_procs.spawn("owner", Owner, child_procs, MODE)
step("fail_children", lambda: owner.fail_children.call_one(
    2 if MODE == "true" else 0).get(timeout=60))
if MODE != "true":
    wait_until(lambda: hooked, 30)
step("owner_after", lambda: owner.ping.call_one().get(timeout=30))
step("stop_owner_procs", lambda: owner_procs.stop().get(timeout=30))
step("stop_child_procs", lambda: child_procs.stop().get(timeout=30))
report_hook()
