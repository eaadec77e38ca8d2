"""Supervision across processes (monarch_cy._actor.host.child_failures, .actor_failure,
.loop_lifecycle): an actor that owns a mesh on procs the client handed to it hears of
each child failure through ``__supervise__``, wherever the child runs; an unhandled
one reaches the client; a dead owner's children stop."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from _polling import wait_until
from monarch_cy.actor import Actor, MeshFailure, SupervisionError, endpoint, this_host


class Boom(BaseException):
    """Not an Exception: an endpoint raising it fails its actor."""


class Child(Actor):
    @endpoint
    async def ok(self):
        return os.getpid()

    @endpoint
    async def fail(self):
        raise Boom("child failed")

    @endpoint
    async def raise_value_error(self):
        raise ValueError("plain error")


class Owner(Actor):
    """Owns ``child`` on the proc mesh it was given (not one it started)."""

    def __init__(self, procs, verdict="handle"):
        self.child = procs.spawn("child", Child)
        self.verdict = verdict
        self.failures: list = []
        self.event = asyncio.Event()

    def __supervise__(self, failure: MeshFailure):
        self.failures.append(failure)
        self.event.set()               # the loop's Event: set on the loop's thread
        if self.verdict == "raise":
            raise RuntimeError("supervise gave up")
        return self.verdict == "handle"

    @endpoint
    async def fail_children_and_wait(self, n: int):
        """Fail the children with nowhere to reply, then wait (on this actor's loop)
        until ``__supervise__`` saw ``n`` failures: it must run meanwhile."""
        self.child.fail.broadcast()
        deadline = time.monotonic() + 30
        while len(self.failures) < n and time.monotonic() < deadline:
            self.event.clear()
            try:
                await asyncio.wait_for(self.event.wait(), 1)
            except asyncio.TimeoutError:
                pass
        return [(f.mesh_name, f.crashed_ranks, f.kind, f.report()) for f in self.failures]

    @endpoint
    async def fail_children_by_call(self):
        try:
            await self.child.fail.call()
        except SupervisionError as e:
            return str(e)
        return "no error"

    @endpoint
    async def seen(self):
        return [(f.crashed_ranks, f.kind, f.report()) for f in self.failures]

    @endpoint
    async def child_pids(self):
        return [pid for _, pid in await self.child.ok.call()]

    @endpoint
    async def get_child(self):
        return self.child

    @endpoint
    async def exit_hard(self):
        os._exit(3)


class SyncOwner(Actor):
    def __init__(self, procs):
        self.child = procs.spawn("child", Child)
        self.failures: list = []

    def __supervise__(self, failure):
        self.failures.append(failure.crashed_ranks)
        return True

    @endpoint
    def fail_children(self):
        self.child.fail.broadcast()

    @endpoint
    def seen(self):
        return list(self.failures)


@pytest.fixture
def two():
    """The owner's procs and the children's: two proc meshes of the client."""
    owner_procs = this_host().spawn_procs(per_host={"gpus": 1})
    child_procs = this_host().spawn_procs(per_host={"gpus": 3})
    yield owner_procs, child_procs
    for pm in (owner_procs, child_procs):
        pm.stop().get(30)


def test_an_owner_hears_each_failed_child_in_another_process_while_it_waits(two, hook):
    owner_procs, child_procs = two
    owner = owner_procs.spawn("owner", Owner, child_procs)
    seen = owner.fail_children_and_wait.call_one(3).get(60)
    assert sorted(r for _, r, _, _ in seen) == [[0], [1], [2]]   # one per failed rank
    for mesh_name, _, kind, report in seen:
        assert mesh_name.startswith("child-") and kind == "actor"
        assert "Boom: child failed" in report
        assert ".<test_child_failures.Child child{'gpus':" in report
    assert hook == []                              # handled: the client hears nothing


def test_a_sync_owner_hears_them_too(two, hook):
    owner_procs, child_procs = two
    owner = owner_procs.spawn("owner", SyncOwner, child_procs)
    owner.fail_children.call_one().get(30)
    assert wait_until(lambda: len(owner.seen.call_one().get(30)) == 3)
    assert hook == []


def test_the_caller_hears_after_the_owner_did(two, hook):
    """A call that fails a child is answered once the child's owner has it queued:
    every child that failed with it has reached ``__supervise__`` by the time the
    caller sees the error."""
    owner_procs, child_procs = two
    owner = owner_procs.spawn("owner", Owner, child_procs)
    text = owner.fail_children_by_call.call_one().get(60)
    assert "Boom: child failed" in text
    assert sorted(r for r, _, _ in owner.seen.call_one().get(30)) == [[0], [1], [2]]


@pytest.mark.parametrize("verdict,expect", [
    ("unhandled", "Boom: child failed"),
    ("raise", "supervise gave up"),
])
def test_an_unhandled_child_failure_reaches_the_client(two, hook, verdict, expect):
    owner_procs, child_procs = two
    owner = owner_procs.spawn("owner", Owner, child_procs, verdict)
    with pytest.raises(SupervisionError, match=expect):
        # the owner fails while this call waits: its caller gets the failure
        owner.fail_children_and_wait.call_one(3).get(60)
    assert wait_until(lambda: hook)
    assert expect in hook[0].report()
    with pytest.raises(SupervisionError, match=expect):
        owner.seen.call_one().get(30)                # later calls: the same failure


def test_a_killed_child_proc_reaches_its_owner_named_as_the_child(two, hook):
    owner_procs, child_procs = two
    owner = owner_procs.spawn("owner", Owner, child_procs)
    pids = owner.child_pids.call_one().get(30)
    os.kill(pids[1], 9)
    assert wait_until(lambda: owner.seen.call_one().get(30))
    seen = owner.seen.call_one().get(30)
    assert [(r, k) for r, k, _ in seen] == [([1], "proc")]
    assert "Child child{'gpus': 1/3}" in seen[0][2]
    assert "Killed(sig=9)" in seen[0][2]


def test_a_dead_owners_children_stop_and_calls_on_them_fail(two, hook):
    owner_procs, child_procs = two
    owner = owner_procs.spawn("owner", Owner, child_procs)
    children = owner.get_child.call_one().get(30)
    assert len(children.ok.call().get(30)) == 3
    with pytest.raises(SupervisionError):
        owner.exit_hard.call_one().get(30)
    with pytest.raises(SupervisionError,
                       match=r"timed out reaching controller .*Owner owner.* for mesh "
                             r"child-\w+\. Assuming controller's proc is dead \(it is: "):
        children.ok.call().get(30)
    # the children's procs live on (the client owns them) and take new actors
    again = child_procs.spawn("again", Child)
    assert len(again.ok.call().get(30)) == 3
