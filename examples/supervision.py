"""Supervision with recovery: a worker dies, the controller sees it, respawns it in place.

Run: python examples/supervision.py
"""

from __future__ import annotations

import os
import signal

import monarch_cy.actor
from monarch_cy.actor import Actor, SupervisionError, current_rank, endpoint, this_host

# This program handles the failures it sees (it catches the SupervisionError and
# respawns): without this opt-in, Monarch's rule holds and the default fault hook
# ends the program at the failure (docs/actor.md, "Supervision and recovery").
monarch_cy.actor.fault_hook_skips_seen = True


class Counter(Actor):
    def __init__(self) -> None:
        self.n = 0

    @endpoint
    def incr(self) -> int:
        self.n += 1
        return self.n

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def where(self) -> int:
        return current_rank().rank


def main() -> int:
    procs = this_host().spawn_procs(per_host={"procs": 3})
    counters = procs.spawn("counter", Counter)
    counters.incr.call().get()
    victim = counters.slice(procs=1)
    os.kill(victim.pid.call_one().get(), signal.SIGKILL)
    try:
        victim.incr.call_one().get(timeout=30)
    except SupervisionError as e:
        print(f"controller saw the failure: {e}")
    procs.respawn([1]).get(timeout=120)           # same shape and names; __init__ re-runs
    after = counters.incr.call().get(timeout=60)
    print("after respawn, counts per rank:", [after.item(procs=r) for r in range(3)])
    assert [after.item(procs=r) for r in range(3)] == [2, 1, 2]
    print("recovered: the respawned rank starts fresh, the others kept their state")
    procs.stop().get()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
