"""A long-lived controller that spawns and stops meshes stays flat (issue 35, item
6): a stopped mesh leaves no file in the run directory, no entry in the controller's
registries and no memory behind."""

import ctypes
import gc
import os
import time

from _actors import Noter
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.cast import router as cast_router
from monarch_cy.actor import this_host

CYCLES = 200
WARM = 40


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _settled_rss() -> int:
    """RSS once the stops' timers (grace 3 s, release 1 s) have run and freed memory
    is returned."""
    time.sleep(3.3)
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    return _rss_kib()


def _footprint(node, host) -> dict:
    return {"files": len(os.listdir(node.rundir)), "dead": len(node.dead),
            "actor homes": len(_state.ACTOR_HOME), "live procs": len(_state.LIVE_PROCS),
            "proc mesh states": len(_state.STATES), "routers": len(cast_router.ROUTERS),
            "host mesh's meshes": len(host._record.meshes)}


def test_spawn_stop_cycles_leave_nothing_behind():
    host = this_host()
    node = _state.get_node()
    start = time.monotonic()
    rss_warm = before = None
    for i in range(CYCLES):
        pm = host.spawn_procs(per_host={"gpus": 2})
        m = pm.spawn("cycle", Noter)
        assert m.note.call(i).get(30).values() == [i, i]
        pm.stop().get(30)
        if i == WARM - 1:
            rss_warm = _settled_rss()
            before = _footprint(node, host)
    rss_end = _settled_rss()
    after = _footprint(node, host)
    took = time.monotonic() - start
    grown = rss_end - rss_warm
    print(f"{CYCLES} cycles in {took:.1f} s; RSS {rss_warm} -> {rss_end} KiB; "
          f"{before} -> {after}")
    for k in ("dead", "actor homes", "live procs", "proc mesh states", "routers"):
        assert after[k] == before[k], (k, before, after)
    assert after["host mesh's meshes"] <= before["host mesh's meshes"], (before, after)
    # every proc and actor socket of the stopped meshes is gone: what is left is the
    # controller's own and the session's (``before``: settled after the first cycles,
    # as the other tests' meshes are); nothing grew with the cycles
    assert after["files"] <= before["files"] + 4, (before, after)
    assert grown < 1536, f"RSS grew {grown} KiB over {CYCLES - WARM} spawn/stop cycles"
