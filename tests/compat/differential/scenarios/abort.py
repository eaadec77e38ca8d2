"""context().actor_instance.abort(reason) in an endpoint; the client records supervision."""

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, context, endpoint, this_host  # noqa: E402


class A(Actor):
    @endpoint
    def quit(self):
        context().actor_instance.abort("giving up")
        return "after abort"

    @endpoint
    def ok(self):
        return "alive"


pm = this_host().spawn_procs(per_host={"gpus": 1})
a = pm.spawn("a", A)
step("abort_call", lambda: a.quit.call_one().get(timeout=15))
wait_until(lambda: hooked)
step("after", lambda: a.ok.call_one().get(timeout=10))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
