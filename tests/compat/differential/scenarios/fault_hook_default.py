"""The default unhandled_fault_hook: a proc of a client-owned mesh dies; what the program
prints, and its exit code, are the observations (the harness records them)."""
import json
import sys
import time


def obs(key, value):
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
