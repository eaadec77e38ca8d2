"""current_rank() and context().message_rank in a sliced mesh."""

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, context, current_rank, current_size, endpoint, this_host  # noqa: E402


class A(Actor):
    @endpoint
    def where(self):
        p = current_rank()
        return {"rank": p.rank, "str": str(p), "dict": dict(p), "size": current_size(),
                "instance_rank": str(context().actor_instance.rank)}


pm = this_host().spawn_procs(per_host={"gpus": 4})
a = pm.spawn("a", A)
step("whole", lambda: a.where.call().get(timeout=30).values())
step("slice_2_4", lambda: a.slice(gpus=slice(2, 4)).where.call().get(timeout=30).values())
step("slice_3", lambda: a.slice(gpus=3).where.call_one().get(timeout=30))
step("choose", lambda: a.slice(gpus=slice(1, 2)).where.choose().get(timeout=30))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
