"""current_rank() and context().message_rank in a sliced mesh."""
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

from monarch.actor import Actor, context, current_rank, current_size, endpoint, this_host  # noqa: E402


class A(Actor):
    @endpoint
    def where(self):
        p = current_rank()
        return {"rank": p.rank, "str": str(p), "dict": dict(p), "size": current_size(),
                "instance_rank": str(context().actor_instance.rank)}


pm = this_host().spawn_procs(per_host={"gpus": 4})
a = pm.spawn("a", A)
step("whole", lambda: a.where.call().get(timeout=30).values())
step("slice_2_4", lambda: a.slice(gpus=slice(2, 4)).where.call().get(timeout=30).values())
step("slice_3", lambda: a.slice(gpus=3).where.call_one().get(timeout=30))
step("choose", lambda: a.slice(gpus=slice(1, 2)).where.choose().get(timeout=30))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
