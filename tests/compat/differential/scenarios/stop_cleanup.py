"""ActorMesh.stop(): its result, __cleanup__, calls after it; ProcMesh.stop() and spawning
after it; a worker's module global finalizer when its proc mesh stops (seen in files
the workers write)."""
import sys
import time

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

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
