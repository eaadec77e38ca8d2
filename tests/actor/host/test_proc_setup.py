"""``spawn_procs(bootstrap=fn)`` (monarch_cy._actor.host.proc_setup): runs in every proc
before its actors, again after a respawn; its failure is the error of ``initialized``
and of every call on that proc's actors, as Monarch's."""

from __future__ import annotations

import os
import time

import pytest

import monarch_cy.actor as api
from monarch_cy.actor import Actor, ActorError, SupervisionError, endpoint, this_host


class Reads(Actor):
    def __init__(self):
        self.at_init = os.environ.get("SET_BY_SETUP")       # what __init__ saw

    @endpoint
    def seen(self):
        return self.at_init

    @endpoint
    def die(self):
        os._exit(5)


def slow_setup():
    time.sleep(0.5)                 # actors spawned meanwhile must wait for it
    from monarch_cy.actor import current_rank
    os.environ["SET_BY_SETUP"] = f"rank{current_rank().rank}-pid{os.getpid()}"


async def async_setup():
    import asyncio
    await asyncio.sleep(0.05)
    os.environ["SET_BY_SETUP"] = "async"


def test_setup_runs_before_any_actor_and_after_a_respawn(monkeypatch):
    faults = []
    monkeypatch.setattr(api, "unhandled_fault_hook", faults.append)
    pm = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=slow_setup)
    try:
        m = pm.spawn("reads", Reads)            # not waiting for initialized first
        seen = list(m.seen.call().get(30).values())
        assert [s.split("-")[0] for s in seen] == ["rank0", "rank1"]
        assert pm.initialized.get(10) is True
        with pytest.raises(SupervisionError):
            m.slice(gpus=1).die.call_one().get(10)
        pm.respawn([1]).get(60)
        again = list(m.seen.call().get(30).values())
        assert again[0] == seen[0] and again[1].startswith("rank1-")
        assert again[1] != seen[1]                   # ran again, in the new process
    finally:
        pm.stop().get(10)


def test_async_setup_and_lambdas():
    pm = this_host().spawn_procs({"gpus": 1}, async_setup)
    try:
        assert pm.spawn("reads", Reads).seen.call_one().get(30) == "async"
    finally:
        pm.stop().get(10)
    pm = this_host().spawn_procs({"gpus": 1},
                                 lambda: os.environ.__setitem__("SET_BY_SETUP", "lambda"))
    try:
        assert pm.spawn("reads", Reads).seen.call_one().get(30) == "lambda"
        assert pm.initialized.get(10) is True
    finally:
        pm.stop().get(10)


def failing_setup():
    raise RuntimeError("no dataset here")


def test_a_failing_setup_is_an_error_of_initialized_and_of_later_calls(monkeypatch):
    """As Monarch's: the setup's exception is the ActorError of ``initialized`` and of
    every call on an actor spawned on that proc; no actor failed, so nothing reaches
    the fault hook, and the actors' ``__init__`` never runs."""
    faults = []
    monkeypatch.setattr(api, "unhandled_fault_hook", faults.append)
    pm = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=failing_setup)
    try:
        m = pm.spawn("reads", Reads)        # before the setup's error is known
        with pytest.raises(ActorError, match="no dataset here") as e:
            pm.initialized.get(30)
        assert e.value.message == "Actor call setup.setup failed."
        assert isinstance(e.value.exception, RuntimeError)
        for _ in range(2):                  # the actor keeps answering, never fails
            with pytest.raises(ActorError, match="no dataset here"):
                m.seen.call().get(30)
        with pytest.raises(ActorError, match="no dataset here"):
            pm.spawn("later", Reads)        # once it is known, spawn raises it
        assert faults == []
    finally:
        pm.stop().get(10)
    assert faults == []


def test_a_failing_setup_nobody_looks_at_reaches_no_fault_hook(monkeypatch):
    faults = []
    monkeypatch.setattr(api, "unhandled_fault_hook", faults.append)
    pm = this_host().spawn_procs(per_host={"gpus": 1}, bootstrap=failing_setup)
    try:
        # the setup has run (and failed) once a call behind it is answered
        with pytest.raises(ActorError):
            pm.spawn("reads", Reads).seen.call_one().get(30)
        time.sleep(0.5)                     # a report would be on its way by now
        assert faults == []
    finally:
        pm.stop().get(10)


def test_bad_setup_is_refused():
    with pytest.raises(TypeError, match="bootstrap must be a callable"):
        this_host().spawn_procs(per_host={"gpus": 1}, bootstrap="setup.sh")


def test_a_setup_that_cannot_be_sent_is_refused_naming_bootstrap_before_any_proc():
    import threading
    from monarch_cy._actor.base import state
    lock = threading.Lock()

    def holds_a_lock():
        return lock

    before = set(state.LIVE_PROCS)
    with pytest.raises(TypeError) as e:
        this_host().spawn_procs(per_host={"gpus": 1}, bootstrap=holds_a_lock)
    text = str(e.value)
    assert text.startswith("bootstrap "), text
    assert "holds_a_lock cannot be sent to the procs" in text and "_thread.lock" in text
    assert "_SetupActor" not in text
    assert set(state.LIVE_PROCS) == before          # nothing was started


def test_no_setup_means_initialized_at_once():
    pm = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        assert pm.initialized.get(0.1) is True
    finally:
        pm.stop().get(10)
