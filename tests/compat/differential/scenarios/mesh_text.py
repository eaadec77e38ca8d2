"""str/repr of Extent, Point and ValueMesh, and ValueMesh lookup errors."""
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
