"""spawn_procs(bootstrap=fn) where fn raises: ProcMesh.initialized raises the setup's
error, so does a spawn (or a call on what it spawned) after it; nothing reaches the
hook."""
import time

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, endpoint, this_host  # noqa: E402


def no_dataset():
    raise RuntimeError("no dataset here")


class A(Actor):
    @endpoint
    def ok(self):
        return "alive"


def first_line_of(fn):
    try:
        return fn()
    except Exception as e:
        return {"type": type(e).__name__, "first_line": str(e).splitlines()[0],
                "mentions_cause": "no dataset here" in str(e)}


pm = this_host().spawn_procs(per_host={"gpus": 1}, bootstrap=no_dataset)
step("initialized", lambda: first_line_of(lambda: pm.initialized.get(timeout=30)))
step("spawn_and_call_after", lambda: first_line_of(
    lambda: pm.spawn("a", A).ok.call_one().get(timeout=30)))
time.sleep(1.0)
obs("hook_calls_before_stop", len(hooked))
report_hook()
