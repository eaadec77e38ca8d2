"""Calls made after an actor failed (its proc still up), by every adverb: each call
fails, and Monarch's client hook also hears of each as an undeliverable message."""
import time

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, context, endpoint, this_host  # noqa: E402


class A(Actor):
    @endpoint
    def quit(self):
        context().actor_instance.abort("giving up")

    @endpoint
    def ok(self):
        return "alive"


pm = this_host().spawn_procs(per_host={"gpus": 2})
a = pm.spawn("a", A)
dead = a.slice(gpus=1)
step("abort_call", lambda: dead.quit.call_one().get(timeout=15))
wait_until(lambda: hooked)
n = len(hooked)
step("call", lambda: a.ok.call().get(timeout=10))
wait_until(lambda: len(hooked) > n)
n = len(hooked)
step("choose", lambda: dead.ok.choose().get(timeout=10))
wait_until(lambda: len(hooked) > n)
n = len(hooked)
step("stream", lambda: [f.get(timeout=10) for f in dead.ok.stream()])
wait_until(lambda: len(hooked) > n)
n = len(hooked)
step("broadcast", lambda: dead.ok.broadcast())
wait_until(lambda: len(hooked) > n, timeout=3)
time.sleep(0.5)
step("alive", lambda: a.slice(gpus=0).ok.call_one().get(timeout=10))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
