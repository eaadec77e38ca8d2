"""Procs die under an endpoint: os._exit(1), SIGSEGV and SIGKILL, one mesh each (all three
at once, to pay supervision's detection delay once).  The client owns the meshes and
records failures with a replaced unhandled_fault_hook."""
import time

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

import os  # noqa: E402
import signal  # noqa: E402

from monarch.actor import Actor, current_rank, endpoint, this_host  # noqa: E402


class A(Actor):
    @endpoint
    def die(self, mode):
        if current_rank().rank != 1:
            return "survived"
        if mode == "exit":
            os._exit(1)
        os.kill(os.getpid(), signal.SIGSEGV if mode == "segv" else signal.SIGKILL)
        time.sleep(5)

    @endpoint
    def ok(self):
        return "alive"


MODES = ("exit", "segv", "kill")
meshes = {}
for mode in MODES:
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    meshes[mode] = (pm, pm.spawn("a_" + mode, A))
for mode in MODES:
    step(f"{mode}.warm", lambda: meshes[mode][1].ok.call().get(timeout=30).values())
futures = {mode: meshes[mode][1].die.call(mode) for mode in MODES}
for mode in MODES:
    step(f"{mode}.die_call", lambda: futures[mode].get(timeout=30).values())
wait_until(lambda: len(hooked) >= 3)
for mode in MODES:
    pm, a = meshes[mode]
    step(f"{mode}.survivor", lambda: a.slice(gpus=0).ok.call_one().get(timeout=10))
    step(f"{mode}.whole_mesh", lambda: a.ok.call().get(timeout=10).values())
step("exit.spawn_after", lambda: meshes["exit"][0].spawn("b", A).ok.call().get(timeout=3).values())
# No stop() of these meshes: Monarch takes about 30 s to stop a mesh with a dead proc;
# the program's exit ends them.
report_hook()
