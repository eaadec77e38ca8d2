"""Recovery in place (ProcMesh.respawn, RestartPolicy) and timeouts."""

import os
import signal
import time

import pytest

from _actors import Echo, Victim
from monarch_cy.actor import (MeshStoppedError, RestartPolicy, SupervisionError,
                              this_host)



def _lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def test_respawn_in_place(tmp_path, procs, name, hook):
    log = str(tmp_path / "log")
    pm = this_host().spawn_procs(per_host={"gpus": 3}, env={"MY_VAR": "kept"})
    m = pm.spawn("workers", Victim, log)
    other = pm.spawn("others", Echo, "x")
    pids = m.pid.call().get(10).values()
    holder = procs.slice(gpus=0).spawn(name, Echo)      # a pickled reference elsewhere
    assert holder.hold.call_one(other.slice(gpus=2)).get(10) == 1
    assert holder.call_held.call_one(3).get(10) == 3
    os.kill(pids[2], signal.SIGKILL)
    with pytest.raises(SupervisionError, match=r"Killed\(sig=9\)"):
        m.slice(gpus=2).sleep.call_one(10).get(5)
    served = m.slice(gpus=0).ping.call_one("during").get(5)        # healthy rank
    t = time.monotonic()
    assert pm.respawn([2]).get(30) == [2]
    took = time.monotonic() - t
    new = m.pid.call().get(10).values()
    assert new[:2] == pids[:2] and new[2] != pids[2]              # healthy ranks kept
    assert m.slice(gpus=2).env.call_one("MY_VAR").get(5) == "kept"
    assert m.slice(gpus=2).env.call_one("MONARCH_CY_RANK").get(5) == "2"
    assert m.slice(gpus=2).env.call_one("CUDA_VISIBLE_DEVICES").get(5) == "2"
    assert other.slice(gpus=2).whoami.call_one().get(5)[0] == "x"  # every mesh is back
    inits = [ln for ln in _lines(log) if ln.startswith("init 2 ")]
    assert len(inits) == 2                                          # __init__ re-ran
    assert holder.call_held.call_one(5).get(10) == 5   # old reference reaches the new actor
    assert served == "during" and took < 10
    time.sleep(1.2)
    assert not hook
    pm.stop().get(10)


def test_respawn_after_actor_failure_and_stop_during_policy(tmp_path, hook):
    log = str(tmp_path / "log")
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    m = pm.spawn("fa", Victim, log)
    pid0 = m.slice(gpus=0).pid.call_one().get(10)
    m.slice(gpus=1).boom.broadcast("bad")                   # the actor fails, its proc lives
    with pytest.raises(SupervisionError, match="bad"):
        m.slice(gpus=1).ping.call_one(1).get(5)
    # The caller's SupervisionError can arrive (on the reply path) a moment before the
    # controller's I/O thread has processed the failure report that marks the rank
    # failed; respawn() with no ranks restarts what has been reported so far.
    end = time.monotonic() + 10
    while not (restarted := pm.respawn().get(30)):
        assert time.monotonic() < end, "the actor failure was never reported"
        time.sleep(0.02)
    assert restarted == [1]
    assert m.ping.call(4).get(10).values() == [4, 4]
    assert m.slice(gpus=0).pid.call_one().get(5) == pid0
    pm.stop().get(10)


def test_restart_policy(tmp_path, hook):
    log = str(tmp_path / "log")
    pm = this_host().spawn_procs(per_host={"gpus": 2},
                                 restart=RestartPolicy(max_restarts=2, backoff_s=0.05))
    m = pm.spawn("auto", Victim, log)
    for n in range(2):
        pid = m.slice(gpus=1).pid.call_one().get(10)
        os.kill(pid, signal.SIGKILL)
        end = time.monotonic() + 15
        while True:                       # fails until the policy brought it back
            try:
                if m.slice(gpus=1).pid.call_one().get(5) != pid:
                    break
            except SupervisionError:
                pass
            assert time.monotonic() < end, "the policy did not respawn the rank"
            time.sleep(0.05)
    assert not hook
    os.kill(m.slice(gpus=1).pid.call_one().get(10), signal.SIGKILL)   # third: exhausted
    end = time.monotonic() + 10
    while not hook and time.monotonic() < end:
        time.sleep(0.05)
    assert hook and hook[0].ranks == (1,)
    assert m.slice(gpus=0).ping.call_one(1).get(5) == 1
    pm.stop().get(10)


def test_respawn_bad_input_and_double_stop():
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    m = pm.spawn("bi", Victim)
    m.ping.call(1).get(10)
    with pytest.raises(ValueError, match="healthy"):
        pm.respawn([0])
    with pytest.raises(ValueError, match="not a rank"):
        pm.respawn([5])
    assert pm.respawn().get(5) == []                  # nothing failed: nothing to do
    pm.stop().get(10)
    pm.stop().get(1)                                  # double stop
    with pytest.raises(MeshStoppedError, match="stopped on purpose"):
        pm.respawn([0])


def test_stop_during_respawn_fails_it():
    pm = this_host().spawn_procs(per_host={"gpus": 1})
    m = pm.spawn("sd", Victim)
    os.kill(m.pid.call_one().get(10), signal.SIGKILL)
    with pytest.raises(SupervisionError):
        m.ping.call_one(1).get(5)
    fut = pm.respawn([0])
    pm.stop().get(10)
    try:
        fut.get(10)                  # either it finished first or it was stopped
    except MeshStoppedError:
        pass


def test_per_call_timeout_drops_state(echo):
    from monarch_cy._actor.base.state import get_node
    node = get_node()
    one = echo.slice(gpus=3)
    before = node.port_ids()
    t = time.monotonic()
    with pytest.raises(TimeoutError, match="per-call timeout"):
        one.sleep.with_timeout(0.3).call_one(1.0).get(5)
    assert time.monotonic() - t < 0.9
    with pytest.raises(TimeoutError):
        echo.sleep.with_timeout(0.2).call(0.6).get(5)
    assert not node.port_ids() - before              # nothing left behind
    f = one.sleep.call_one(0.3)                       # get(timeout): still pending
    with pytest.raises(TimeoutError, match="still pending"):
        f.get(0.05)
    assert f.get(5) == 0.3
    time.sleep(1.0)                                   # late replies are dropped
    assert one.ping.call_one(1).get(5) == 1
    with pytest.raises(ValueError):
        one.ping.with_timeout(0)


def test_stop_with_stuck_endpoint_is_bounded():
    pm = this_host().spawn_procs(per_host={"gpus": 2}, heartbeat_timeout=0)
    m = pm.spawn("stuck", Victim)
    m.ping.call(1).get(10)
    m.slice(gpus=0).sleep.broadcast(3600)           # blocked, GIL released
    m.slice(gpus=1).wedge.broadcast()               # blocked, GIL held
    time.sleep(0.3)
    t = time.monotonic()
    pm.stop().get(15)
    assert time.monotonic() - t < 5.0


def test_respawn_fails_fast_when_the_new_proc_dies_before_it_is_watched(hook):
    """The new incarnation exits before the respawn listens for its exit: the
    respawn fails within seconds (not the 120 s readiness bound), the calls made
    meanwhile fail with SupervisionError, and a second respawn works."""
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    m = pm.spawn("early", Echo, "e")
    st = pm._state
    pid = m.slice(gpus=1).whoami.call_one().get(10)[4]
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(SupervisionError):
        m.slice(gpus=1).ping.call_one(1).get(10)
    real = st.procs[1].starter

    def dies_at_once():
        h = real()
        h.kill()
        h.wait(10)              # its exit is processed before anyone listens for it
        return h
    st.procs[1].starter = dies_at_once
    t = time.monotonic()
    fut = pm.respawn([1])
    held = m.slice(gpus=1).ping.call_one("held")
    with pytest.raises(SupervisionError):
        fut.get(30)
    assert time.monotonic() - t < 15
    with pytest.raises(SupervisionError):
        held.get(10)
    for p in st.procs:
        p.starter = real
    assert pm.respawn([1]).get(30) == [1]
    assert m.slice(gpus=1).ping.call_one(2).get(10) == 2
    pm.stop().get(10)


def test_calls_right_after_respawn_reach_the_new_proc(hook):
    """respawn() returned: calls made before its Future resolves are held and run
    on the new incarnation, in the order made; none sees the old failure."""
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    m = pm.spawn("after", Echo, "a")
    for trial in range(5):
        pid = m.slice(gpus=1).whoami.call_one().get(10)[4]
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SupervisionError):
            m.slice(gpus=1).ping.call_one(0).get(10)
        fut = pm.respawn([1])
        calls = [m.slice(gpus=1).incr.call_one() for _ in range(5)]
        whole = m.ping.call(trial)
        assert [c.get(30) for c in calls] == [1, 2, 3, 4, 5], trial
        assert whole.get(30).values() == [trial, trial]
        assert fut.get(30) == [1]
        assert m.slice(gpus=1).whoami.call_one().get(10)[4] != pid
    pm.stop().get(10)
