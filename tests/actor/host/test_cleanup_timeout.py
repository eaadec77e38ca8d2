"""``__cleanup__`` has its own budget (``MONARCH_CY_CLEANUP_TIMEOUT``, Monarch's
``cleanup_timeout``, default 3 s): a stop waits for it that long at most."""

from __future__ import annotations

import time

from monarch_cy.actor import Actor, endpoint, this_host
from monarch_cy.config import configured


class SlowCleanup(Actor):
    @endpoint
    def ping(self):
        return "pong"

    def __cleanup__(self, exc):
        time.sleep(30)


def _stop_seconds(pm) -> float:
    am = pm.spawn("slow", SlowCleanup)
    assert am.ping.call_one().get(30) == "pong"
    t0 = time.monotonic()
    am.stop().get(20)
    return time.monotonic() - t0


def test_a_hung_cleanup_is_given_up_after_the_budget():
    pm = this_host().spawn_procs(per_host={"procs": 1},
                                 env={"MONARCH_CY_CLEANUP_TIMEOUT": "0.5"})
    try:
        assert _stop_seconds(pm) < 2.5
    finally:
        pm.stop().get(30)


def test_the_budget_comes_from_the_spawners_configuration():
    with configured(cleanup_timeout="1s"):
        pm = this_host().spawn_procs(per_host={"procs": 1})
    try:
        took = _stop_seconds(pm)
        assert 0.9 < took < 2.9, took            # 1 s, not the 3 s default
    finally:
        pm.stop().get(30)
