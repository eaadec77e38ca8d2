"""A proc stopped on purpose ends as a Python program does (Monarch's procs do):
its ``atexit`` handlers run and its interpreter finalizes, module globals included."""

from __future__ import annotations

import os
import time

import pytest

from _actors import Finalizable
from monarch_cy.actor import this_host


@pytest.mark.parametrize("start", ["fork", "exec"])
def test_stopped_proc_runs_atexit_and_finalizes_module_globals(tmp_path, monkeypatch,
                                                               start):
    if start == "exec":
        monkeypatch.setenv("MONARCH_CY_START", "exec")
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    pids = sorted(pm.spawn("fin", Finalizable, str(tmp_path)).pid.call().get(30).values())
    t = time.monotonic()
    pm.stop().get(20)
    took = time.monotonic() - t
    want = sorted([f"atexit.{p}" for p in pids] + [f"del.{p}" for p in pids])
    assert sorted(os.listdir(tmp_path)) == want
    assert took < 5, f"stop took {took:.2f} s"
