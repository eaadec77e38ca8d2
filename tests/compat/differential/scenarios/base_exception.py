"""An endpoint raises a BaseException that is not an Exception: the actor fails and
its owner's __supervise__ runs (the owner here is an actor)."""
import json
import sys
import time

import monarch.actor


def obs(key, value):
    """One observation: a line the harness collects (key -> JSON value)."""
    print("@@obs " + json.dumps([key, value], default=repr), flush=True)


def describe(e):
    text = str(e)
    return {"type": type(e).__name__, "is_exception": isinstance(e, Exception),
            "first_line": text.splitlines()[0] if text else "", "text": text}


def step(key, fn):
    try:
        value = fn()
    except Exception as e:
        value = {"raised": describe(e)}
    obs(key, value)


def wait_until(fn, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not fn() and time.monotonic() < deadline:
        time.sleep(0.05)


# The client's unhandled_fault_hook, replaced to record (and so drop) what reaches it.
hooked = []
reported = []


def record_hook(failure):
    seen = {"type": type(failure).__name__, "mesh_name": failure.mesh_name,
            "str": str(failure), "report_first_line": failure.report().splitlines()[0]}
    hooked.append(seen)
    if reported:
        obs("hook_call_after_report", seen)


def report_hook():
    """The hook's calls so far, in a stable order; later calls are reported one by one."""
    obs("unhandled_fault_hook_calls", sorted(hooked, key=lambda h: h["str"]))
    reported.append(True)


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
