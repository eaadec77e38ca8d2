"""Plain async endpoints run one at a time; @concurrent_endpoint ones overlap."""
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
