"""An actor owns a child mesh whose actor fails; the owner's __supervise__ returns True,
returns False or raises (argv[1]); the client records what reaches it."""
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
