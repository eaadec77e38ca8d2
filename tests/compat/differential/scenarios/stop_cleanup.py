"""ActorMesh.stop(): its result, __cleanup__, calls after it; ProcMesh.stop() and spawning
after it; a worker's module global finalizer when its proc mesh stops (seen in files
the workers write)."""
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

import os  # noqa: E402
import tempfile  # noqa: E402
import types  # noqa: E402

from monarch.actor import Actor, endpoint, this_host  # noqa: E402

out = tempfile.mkdtemp(prefix="diff-stop-")


class Sentinel:
    def __init__(self, path):
        self.path = path

    def __del__(self):
        with open(self.path, "w") as f:
            f.write("finalized")


class A(Actor):
    def __init__(self, out, tag):
        self.out, self.tag = out, tag
        mod = types.ModuleType("diff_sentinel_" + tag)
        mod.sentinel = Sentinel(os.path.join(out, tag + ".global_del"))
        sys.modules[mod.__name__] = mod

    @endpoint
    def ok(self):
        return "alive"

    def __cleanup__(self, exc):
        with open(os.path.join(self.out, self.tag + ".cleanup"), "w") as f:
            f.write(repr(exc))


def files():
    res = {}
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name)) as f:
            res[name] = f.read()
    return res


pm = this_host().spawn_procs(per_host={"gpus": 1})
a = pm.spawn("a", A, out, "actor_stop")
step("a_ok", lambda: a.ok.call_one().get(timeout=30))
step("actor_mesh_stop", lambda: a.stop().get(timeout=30))
time.sleep(0.2)
obs("files_after_actor_stop", files())
step("call_after_actor_stop", lambda: a.ok.call_one().get(timeout=10))

b = pm.spawn("b", A, out, "proc_stop")
step("b_ok", lambda: b.ok.call_one().get(timeout=30))
step("proc_mesh_stop", lambda: pm.stop().get(timeout=30))
wait_until(lambda: "proc_stop.global_del" in files(), timeout=5)
obs("files_after_proc_stop", files())
step("call_after_proc_stop", lambda: b.ok.call_one().get(timeout=10))
step("spawn_after_proc_stop", lambda: pm.spawn("c", A, out, "late"))
report_hook()
