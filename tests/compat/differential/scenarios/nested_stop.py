"""An actor that owns a child mesh (spawned in an endpoint with this_proc().spawn):
what stopping the parent's mesh does to the child (its __cleanup__, calls to it)."""
import os
import tempfile

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, endpoint, this_host, this_proc  # noqa: E402


class Child(Actor):
    def __init__(self, out):
        self.out = out

    @endpoint
    def ok(self):
        return "child alive"

    def __cleanup__(self, exc):
        with open(os.path.join(self.out, "child.cleanup"), "w") as f:
            f.write(repr(exc))


class Parent(Actor):
    def __init__(self, out):
        self.out = out
        self.child = None

    @endpoint
    def spawn_child(self):
        self.child = this_proc().spawn("child", Child, self.out)
        return self.child.ok.call_one().get()

    @endpoint
    def the_child(self):
        return self.child

    def __cleanup__(self, exc):
        with open(os.path.join(self.out, "parent.cleanup"), "w") as f:
            f.write(repr(exc))


out = tempfile.mkdtemp(prefix="nested-stop-")
pm = this_host().spawn_procs(per_host={"gpus": 1})
parent = pm.spawn("parent", Parent, out)
step("spawn_child", lambda: parent.spawn_child.call_one().get(timeout=30))
child = parent.the_child.call_one().get(timeout=30)
step("child_before", lambda: child.ok.call_one().get(timeout=10))
step("parent_stop", lambda: parent.stop().get(timeout=30))
wait_until(lambda: "child.cleanup" in os.listdir(out), timeout=5)
obs("cleanups", sorted(os.listdir(out)))
step("child_after", lambda: child.ok.call_one().get(timeout=10))
step("proc_stop", lambda: pm.stop().get(timeout=30))
report_hook()
