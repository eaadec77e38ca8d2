"""Procs die under an endpoint: os._exit(1), SIGSEGV and SIGKILL, one mesh each (all three
at once, to pay supervision's detection delay once).  The client owns the meshes and
records failures with a replaced unhandled_fault_hook."""
import json
import sys
import time

import monarch.actor


def obs(key, value):
    """One observation: a line the harness collects (key -> JSON value)."""
    print("@@obs " + json.dumps([key, value], default=repr), flush=True)


def describe(e):
    text = str(e)
    return {"type": type(e).__name__, "is_exception": isinstance(e, Exception),
            "first_line": text.splitlines()[0] if text else "", "text": text}


def step(key, fn):
    try:
        value = fn()
    except Exception as e:
        value = {"raised": describe(e)}
    obs(key, value)


def wait_until(fn, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not fn() and time.monotonic() < deadline:
        time.sleep(0.05)


# The client's unhandled_fault_hook, replaced to record (and so drop) what reaches it.
hooked = []
reported = []


def record_hook(failure):
    seen = {"type": type(failure).__name__, "mesh_name": failure.mesh_name,
            "str": str(failure), "report_first_line": failure.report().splitlines()[0]}
    hooked.append(seen)
    if reported:
        obs("hook_call_after_report", seen)


def report_hook():
    """The hook's calls so far, in a stable order; later calls are reported one by one."""
    obs("unhandled_fault_hook_calls", sorted(hooked, key=lambda h: h["str"]))
    reported.append(True)


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
