"""str/repr of Extent, Point and ValueMesh, and ValueMesh lookup errors."""

import monarch.actor
from _obs import (describe, hooked, obs, record_hook, report_hook,  # noqa: E402,F401
                  step, wait_until)

monarch.actor.unhandled_fault_hook = record_hook

from monarch.actor import Actor, Extent, Point, current_rank, endpoint, this_host  # noqa: E402

ext = Extent(["hosts", "gpus"], [2, 4])
obs("extent", {"str": str(ext), "repr": repr(ext), "labels": list(ext.labels),
               "sizes": list(ext.sizes), "len": len(ext), "nelements": ext.nelements})
pt = Point(5, ext)
obs("point", {"str": str(pt), "repr": repr(pt), "rank": pt.rank, "dict": dict(pt),
              "extent": str(pt.extent)})


class A(Actor):
    @endpoint
    def me(self):
        return str(current_rank())


pm = this_host().spawn_procs(per_host={"x": 2, "y": 2})
a = pm.spawn("a", A)
vm = a.me.call().get(timeout=30)
obs("value_mesh", {"str": str(vm), "repr": repr(vm), "values": vm.values(),
                   "items": [[str(p), v] for p, v in vm.items()]})
step("get_1", lambda: vm.get(1))
step("get_9", lambda: vm.get(9))
step("item_x1_y0", lambda: vm.item(x=1, y=0))
step("item_missing_dim", lambda: vm.item(x=1))
step("item_extra_dim", lambda: vm.item(x=1, y=0, z=0))
step("item_out_of_range", lambda: vm.item(x=5, y=0))
step("sliced", lambda: repr(vm.slice(x=1)))
step("stop", lambda: pm.stop().get(timeout=30))
report_hook()
