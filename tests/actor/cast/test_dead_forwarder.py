"""A cast-tree head that died and was not respawned (issue 35, items 1 and 5): a
stop still reaches every live proc and actor below it, in the time a stop takes
anyway, and a call that failed behind it names the rank to respawn, so the recovery
recipe of docs/actor.md works as written."""

import os
import signal
import time

import pytest

from _actors import Noter
from monarch_cy._actor.cast import tree as cast_tree
from monarch_cy._transport.node import current_node
from monarch_cy.actor import SupervisionError, this_host
import monarch_cy.actor as api

N, K = 16, 4



@pytest.fixture
def mesh(monkeypatch, tmp_path, hook):
    """16 procs at fan-out 4 with a Noter each (its __cleanup__ leaves a file), and
    the rank of a head that forwards to others."""
    monkeypatch.setattr(cast_tree, "_FANOUT", K)
    pm = this_host().spawn_procs(per_host={"gpus": N})
    m = pm.spawn("df", Noter, str(tmp_path / "seen"))
    pids = m.pid.call().get(30).values()
    plan = cast_tree.Plan(m._addrs, m._procs, range(N), K)
    head = m._procs.index(plan.heads[1][0])
    below = sorted(m._procs.index(p) for p in plan.below[plan.heads[1][0]])
    assert below, "the head forwards to no one"
    yield pm, m, pids, head, below
    pm.stop().get(30)


def _cleaned(tmp_path) -> set:
    return {int(f.rsplit(".", 1)[1]) for f in os.listdir(tmp_path) if f.startswith("seen.")}


def _wait_dead(key) -> None:
    end = time.monotonic() + 10
    while key not in current_node().dead:
        assert time.monotonic() < end, "the kill was not noticed"
        time.sleep(0.02)


@pytest.mark.parametrize("noticed", [False, True], ids=["just-killed", "known-dead"])
def test_proc_mesh_stop_reaches_every_live_proc_below_a_dead_head(mesh, tmp_path,
                                                                    noticed):
    pm, m, pids, head, below = mesh
    os.kill(pids[head], signal.SIGKILL)
    if noticed:
        _wait_dead(m._procs[head])
    t = time.monotonic()
    pm.stop().get(30)
    took = time.monotonic() - t
    assert _cleaned(tmp_path) == set(range(N)) - {head}
    assert took < 2.0, f"stop took {took:.2f} s: the procs below {head} waited for the kill"


@pytest.mark.parametrize("noticed", [False, True], ids=["just-killed", "known-dead"])
def test_actor_mesh_stop_reaches_every_live_actor_below_a_dead_head(mesh, tmp_path,
                                                                    noticed):
    pm, m, pids, head, below = mesh
    os.kill(pids[head], signal.SIGKILL)
    if noticed:
        _wait_dead(m._procs[head])
    assert m.stop().get(15) == ()
    assert _cleaned(tmp_path) == set(range(N)) - {head}


def test_the_recovery_recipe_works_behind_a_dead_forwarder(mesh, monkeypatch):
    pm, m, pids, head, below = mesh
    monkeypatch.setattr(api, "fault_hook_skips_seen", True)     # as the recipe does
    # more ranks than the fan-out (it goes down the tree), the dead head not one of them
    span = slice(below[0], below[-1] + 4)
    procs, trainers = pm, m.slice(gpus=span)
    assert len(range(N)[span]) > K and head not in range(N)[span]
    os.kill(pids[head], signal.SIGKILL)
    _wait_dead(m._procs[head])
    i = 7
    # docs/actor.md, "Recovery in place", as written:
    try:
        trainers.note.call(i).get()
        raise AssertionError("the call behind the dead head did not fail")
    except SupervisionError as e:
        assert e.rank == head, e
        assert f"respawn rank {head}" in str(e)
        procs.respawn([e.rank]).get(timeout=60)
        assert trainers.note.call(i).get().values() == [i] * len(range(N)[span])
    assert m.note.call(2).get(10).values() == [2] * N


# A slice whose route crosses a head outside it, with the head's rank (10) beyond the
# slice's length (5): the SupervisionError for the ranks behind the dead head carries
# the head's rank (the one to respawn) and must not look it up in the slice.


def _last_head(m):
    plan = cast_tree.Plan(m._addrs, m._procs, range(N), K)
    head = m._procs.index(plan.heads[-1][0])
    below = sorted(m._procs.index(p) for p in plan.below[plan.heads[-1][0]])
    span = slice(below[0], N)                    # the ranks after the head, not it
    assert head == 10 and below == [11, 12, 13, 14] and len(range(N)[span]) > K
    return head, span


def test_a_slice_call_behind_a_known_dead_forwarder_fails_cleanly(mesh):
    """The forwarder's rank lies outside the slice: the error names it without
    looking it up in the slice (that raised IndexError from call())."""
    pm, m, pids, _, _ = mesh
    head, span = _last_head(m)
    os.kill(pids[head], signal.SIGKILL)
    _wait_dead(m._procs[head])
    with pytest.raises(SupervisionError) as e:
        m.slice(gpus=span).note.call(1).get(10)
    assert e.value.rank == head


def test_a_slice_call_whose_forwarder_dies_mid_call_fails(mesh):
    """As above, when the forwarder dies while the call is out (the lookup raised in
    the pump, where the failure was dropped and the call hung)."""
    pm, m, pids, _, _ = mesh
    head, span = _last_head(m)
    fut = m.slice(gpus=span).nap.call(1, 2.0)
    time.sleep(0.5)
    os.kill(pids[head], signal.SIGKILL)
    with pytest.raises(SupervisionError) as e:
        fut.get(10)
    assert e.value.rank == head
