"""The debugger driven from a program, Monarch's way: a DebugController subclass whose
``_debug_io`` is scripted and whose ``_enter()`` runs the monarch_dbg> prompt until
``quit``.  Two ranks pause at ``breakpoint()``: list them, attach/step/detach and
attach again (the output since the last command is replayed, in pdb's own pieces),
continue one into an exception (it pauses post-mortem in the same session), then
``continue`` everything; the call fails with the endpoint's error."""

import sys
import time

import monarch.actor
from _obs import obs, record_hook, report_hook  # noqa: E402

monarch.actor.unhandled_fault_hook = record_hook

from _debugee_actors import Debugee  # noqa: E402
from monarch.actor import this_host  # noqa: E402
from monarch._src.actor.concurrent import concurrent_endpoint  # noqa: E402
from monarch._src.actor.debugger.debug_controller import DebugController  # noqa: E402
from monarch._src.actor.debugger.debug_io import DebugIO  # noqa: E402
from monarch._src.actor.proc_mesh import get_or_spawn_controller  # noqa: E402


class ScriptIO(DebugIO):
    def __init__(self, lines):
        self.lines = list(lines)
        self.out = []

    async def input(self, prompt=""):
        return self.lines.pop(0)         # every script ends with quit

    async def output(self, msg):
        self.out.append(msg)

    async def quit(self):
        pass


class Scripted(DebugController):
    @concurrent_endpoint
    async def enter(self, lines):
        self._debug_io = ScriptIO(lines)
        await self._enter()
        return self._debug_io.out


def infos(ctl):
    return [[i.rank, dict(i.coords), i.function, i.lineno]
            for i in ctl.list.call_one(print_output=False).get(timeout=30)]


def wait_sessions(ctl, n, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = infos(ctl)
        if len(got) == n and all(g[3] is not None for g in got):
            return got
        time.sleep(0.2)
    return infos(ctl)


def after(chunks, marker):
    """The pdb chunks after the first chunk starting with ``marker``, up to the next
    prompt (inclusive)."""
    out = None
    for c in chunks:
        if out is None:
            if c.startswith(marker):
                out = []
            continue
        out.append(c)
        if c == "(Pdb) ":
            return out
    return out


ctl = get_or_spawn_controller("debug_controller", Scripted).get(timeout=30)
pm = this_host().spawn_procs(per_host={"hosts": 1, "gpus": 3})
deb = pm.spawn("debugee", Debugee)
name = deb.slice(gpus=0).name.call_one().get(timeout=30)
fut = deb.run.call()
first = wait_sessions(ctl, 2)
obs("paused", first)

out = ctl.enter.call_one([f"attach {name} 0", "n", "detach", f"attach {name} 0",
                          "detach", "quit"]).get(timeout=60)
obs("replayed_after_reattach", after(out, f"<last pdb output for {name} 0 follows>"))
obs("stepped", wait_sessions(ctl, 2))

out = ctl.enter.call_one([f"attach {name} 1", "c", "detach", "quit"]).get(timeout=60)
obs("after_continue_into_raise", wait_sessions(ctl, 2))
obs("post_mortem_prompt_seen", "(Pdb) " in out)

out = ctl.enter.call_one(["continue", "quit"]).get(timeout=60)
obs("left", wait_sessions(ctl, 0))
try:
    fut.get(timeout=60)
    obs("call", "returned")
except Exception as e:
    obs("call", {"type": type(e).__name__, "bad_rank": "ValueError: bad rank" in str(e)})
obs("sessions_at_end", infos(ctl))
pm.stop().get(timeout=30)
report_hook()
sys.stdout.flush()
