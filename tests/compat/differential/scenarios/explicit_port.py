"""@endpoint(explicit_response_port=True): the port answers; an exception in such an
endpoint, and port.exception()."""
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

from monarch.actor import Actor, endpoint, this_host  # noqa: E402


class A(Actor):
    @endpoint(explicit_response_port=True)
    def double(self, port, x):
        port.send(2 * x)

    @endpoint(explicit_response_port=True)
    def raises(self, port, x):
        raise ValueError(f"raised with {x}")

    @endpoint(explicit_response_port=True)
    def via_port(self, port, x):
        port.exception(ValueError(f"sent with {x}"))

    @endpoint
    def ok(self):
        return "alive"


pm = this_host().spawn_procs(per_host={"gpus": 1})
a = pm.spawn("a", A)
step("double", lambda: a.double.call_one(3).get(timeout=30))
step("raises", lambda: a.raises.call_one(4).get(timeout=15))
step("via_port", lambda: a.via_port.call_one(5).get(timeout=15))
step("after", lambda: a.ok.call_one().get(timeout=15))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
