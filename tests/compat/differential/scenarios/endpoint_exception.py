"""An endpoint raises Exception: the caller gets ActorError, the actor lives on."""

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, ActorError, endpoint, this_host  # noqa: E402


class Oops(Exception):
    pass


class A(Actor):
    @endpoint
    def boom(self, msg):
        raise Oops(msg)

    @endpoint
    def ok(self):
        return "alive"


pm = this_host().spawn_procs(per_host={"gpus": 2})
a = pm.spawn("a", A)
try:
    a.boom.call("whole mesh").get(timeout=30)
    obs("call", "returned")
except Exception as e:
    obs("call", describe(e))
    obs("call.isinstance_ActorError", isinstance(e, ActorError))
    obs("call.exception", [type(getattr(e, "exception", None)).__name__,
                           str(getattr(e, "exception", None))])
step("call_one_sliced", lambda: a.slice(gpus=1).boom.call_one("one rank").get(timeout=30))
step("after", lambda: a.ok.call().get(timeout=30).values())
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
