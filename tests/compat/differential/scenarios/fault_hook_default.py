"""The default unhandled_fault_hook: a proc of a client-owned mesh dies; what the program
prints, and its exit code, are the observations (the harness records them)."""
import time

from _obs import describe, obs, step, wait_until  # noqa: F401

import os  # noqa: E402

from monarch.actor import Actor, current_rank, endpoint, this_host  # noqa: E402


class A(Actor):
    @endpoint
    def die(self):
        if current_rank().rank == 1:
            os._exit(1)
        return "survived"


pm = this_host().spawn_procs(per_host={"gpus": 2})
a = pm.spawn("a", A)
try:
    a.die.call().get(timeout=20)
except Exception:
    pass  # what the caller gets is another scenario's (proc_death) observation
time.sleep(10)
obs("main_thread", "slept 10 s undisturbed")
