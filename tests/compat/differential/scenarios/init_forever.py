"""An actor whose __init__ never returns (after a side effect the client sees):
ActorMesh.stop() resolves; a call after it fails; the proc mesh stops."""
import threading

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, Channel, endpoint, this_host  # noqa: E402


class Counter(Actor):
    def __init__(self, v):
        self.v = v

    @endpoint
    def value(self):
        return self.v


class Forever(Actor):
    def __init__(self, procs, port):
        port.send(procs.spawn("counter", Counter, 42))
        threading.Event().wait()

    @endpoint
    async def unreachable(self):
        return "never"


pm = this_host().spawn_procs(per_host={"gpus": 1})
send, recv = Channel.open()
forever = pm.spawn("forever", Forever, pm, send)
counter = recv.recv().get(timeout=30)
step("counter_value", lambda: counter.value.call_one().get(timeout=30))
step("stop_forever", lambda: forever.stop().get(timeout=30))
step("stop_procs", lambda: pm.stop().get(timeout=30))
report_hook()
