"""``hold_gil_for_test`` (Monarch's extension exports it for its tests; compat's
``monarch._rust_bindings.monarch_hyperactor.actor_mesh`` gives ours): a thread that,
after a delay, holds the GIL without releasing it."""

from __future__ import annotations

import threading
import time

import pytest

from monarch_cy.compat import _paths
from monarch_cy.compat._private import hold_gil_for_test


def test_the_monarch_path_gives_it():
    mod = _paths.make_shim("monarch._rust_bindings.monarch_hyperactor.actor_mesh")
    assert mod.hold_gil_for_test is hold_gil_for_test


def test_it_returns_at_once_then_stalls_other_threads():
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    t = threading.Thread(target=tick)
    t.start()
    start = time.monotonic()
    hold_gil_for_test(delay_secs=0.2, hold_secs=0.6)
    assert time.monotonic() - start < 0.1               # returns at once
    time.sleep(1.2)
    stop.set()
    t.join()
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) >= 0.5                              # nobody ran while it held


@pytest.mark.parametrize("bad", [-1, float("nan"), "2", True])
def test_bad_durations_are_refused_naming_them(bad):
    with pytest.raises(ValueError, match="delay_secs must be a number of seconds"):
        hold_gil_for_test(delay_secs=bad)
