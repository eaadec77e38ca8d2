"""Stopping an async actor: its running @concurrent_endpoint is cancelled and has ended
before its async __cleanup__ runs (the order it writes to a file)."""
import asyncio
import os
import tempfile

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, Port, concurrent_endpoint, endpoint, this_host  # noqa: E402

out = tempfile.mkdtemp(prefix="diff-cancel-")


class A(Actor):
    def __init__(self, path):
        self.file = open(path, "w")
        self.never = asyncio.Event()

    @concurrent_endpoint(explicit_response_port=True)
    async def run(self, port: Port[str]):
        port.send("started")
        try:
            await self.never.wait()
        finally:
            self.file.write("task ended\n")
            self.file.flush()

    @endpoint
    async def ping(self):
        return "pong"

    async def __cleanup__(self, exc):
        self.file.write(f"cleanup {exc!r}\n")
        self.file.close()


path = os.path.join(out, "order")
pm = this_host().spawn_procs(per_host={"gpus": 1})
a = pm.spawn("a", A, path)
step("run", lambda: a.run.call_one().get(timeout=30))
step("ping_meanwhile", lambda: a.ping.call_one().get(timeout=30))
step("stop", lambda: pm.stop().get(timeout=30))
with open(path) as f:
    obs("order", f.read().splitlines())
report_hook()
