"""context().actor_instance.abort() with no reason: the failure's text."""
import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, context, endpoint, this_host  # noqa: E402


class A(Actor):
    @endpoint
    def quit(self):
        context().actor_instance.abort()


pm = this_host().spawn_procs(per_host={"gpus": 1})
a = pm.spawn("a", A)
try:
    a.quit.call_one().get(timeout=15)
except Exception:
    pass                       # Monarch races the reply with the failure
wait_until(lambda: hooked)
obs("reports", [h["str"] for h in hooked])
step("stop", lambda: pm.stop().get(timeout=30))
