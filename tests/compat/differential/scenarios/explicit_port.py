"""@endpoint(explicit_response_port=True): the port answers; an exception in such an
endpoint, and port.exception()."""

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, endpoint, this_host  # noqa: E402


class A(Actor):
    @endpoint(explicit_response_port=True)
    def double(self, port, x):
        port.send(2 * x)

    @endpoint(explicit_response_port=True)
    def raises(self, port, x):
        raise ValueError(f"raised with {x}")

    @endpoint(explicit_response_port=True)
    def via_port(self, port, x):
        port.exception(ValueError(f"sent with {x}"))

    @endpoint
    def ok(self):
        return "alive"


pm = this_host().spawn_procs(per_host={"gpus": 1})
a = pm.spawn("a", A)
step("double", lambda: a.double.call_one(3).get(timeout=30))
step("raises", lambda: a.raises.call_one(4).get(timeout=15))
step("via_port", lambda: a.via_port.call_one(5).get(timeout=15))
step("after", lambda: a.ok.call_one().get(timeout=15))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
