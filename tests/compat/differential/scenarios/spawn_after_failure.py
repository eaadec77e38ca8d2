"""A proc where an actor failed takes no new actors (Monarch's "error spawning actor
mesh"); the other procs of the mesh still do."""
import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, endpoint, this_host  # noqa: E402


class Fatal(BaseException):
    pass


class A(Actor):
    @endpoint
    async def die(self):
        raise Fatal("fatal")

    @endpoint
    async def ok(self):
        return "alive"


def outcome(fn):
    try:
        return {"value": fn()}
    except Exception as e:
        text = str(e)
        return {"type": type(e).__name__,
                "refused": "error spawning actor mesh" in text,
                "says_why": "Cannot spawn new actors on mesh with supervision events" in text}


pm = this_host().spawn_procs(per_host={"gpus": 2})
a = pm.spawn("a", A)
step("die", lambda: outcome(lambda: a.slice(gpus=0).die.call_one().get(timeout=30)))
wait_until(lambda: hooked, 30)
step("spawn_on_all", lambda: outcome(lambda: pm.spawn("b", A).initialized.get(timeout=30)))
step("spawn_on_healthy", lambda: outcome(
    lambda: pm.slice(gpus=1).spawn("c", A).ok.call_one().get(timeout=30)))
step("stop", lambda: pm.stop().get(timeout=30))
