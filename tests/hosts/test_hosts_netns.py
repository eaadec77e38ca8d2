"""Across namespace hosts: meshes, calls, RDMA over TCP, losing hosts, bad input."""

from __future__ import annotations

import os
import signal

import pytest

from _hosts_support import TIMEOUT, pid_alive, wait_gone


def test_mesh_spanning_three_hosts_calls_and_broadcasts(hosts3):
    res, _ = hosts3.run("mesh3", {})
    assert sorted(set(res["hosts"])) == sorted(hosts3.net.hostnames)


def test_casts_go_down_a_tree_across_hosts_in_order(hosts3):
    res, _ = hosts3.run("tree3", {}, MONARCH_CY_CAST_FANOUT="2")
    assert len(set(res["hosts"])) == 3 and res["heads"] >= 1


def test_rdma_buffer_between_hosts_uses_tcp(hosts3):
    res, _ = hosts3.run("rdma", {})
    assert res["backend"] == "tcp"


def test_link_down_fails_pending_calls_within_timeout(hosts3):
    res, _ = hosts3.run("cut", {"victim": 2, "how": "link", "veth": hosts3.net.vethes[2],
                                "timeout_s": TIMEOUT})
    assert res["took"] <= TIMEOUT + 1.5, res
    assert "lost" in res["error"] and hosts3.net.hostnames[2] in res["error"], res
    # the cut-off agent lost its controller too: it killed its procs
    assert wait_gone([res["victim_pid"]], TIMEOUT + 5) == []
    assert hosts3.agents[2].poll() is None      # the agent itself keeps serving
    assert "killed its 1 proc(s)" in hosts3.log(2)


def test_agent_killed_fails_pending_calls_at_once(hosts3):
    res, _ = hosts3.run("cut", {"victim": 1, "how": "kill", "timeout_s": TIMEOUT,
                                "agent_pid": _agent_pid(hosts3, 1)})
    assert res["took"] <= TIMEOUT + 1.0, res
    assert wait_gone([res["victim_pid"]], 5) == []   # procs watch their agent


def test_controller_death_makes_agents_clean_up(hosts3):
    res, r = hosts3.run("controller_dies", {}, check=False)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert len(res["pids"]) == 6
    assert wait_gone(res["pids"], TIMEOUT + 5) == [], "procs outlived their controller"
    assert all(a.poll() is None for a in hosts3.agents)


@pytest.mark.parametrize("known_before_spawn", [False, True],
                         ids=["lost-during-spawn", "lost-before-spawn"])
def test_host_vanishing_during_spawn(hosts3, known_before_spawn):
    """Whether the loss is known before the spawn (the spawn fails at once) or comes
    after it (the call fails), the program is told by a SupervisionError; a loss
    the program had not seen within the grace went to the fault hook, once."""
    res, _ = hosts3.run("vanish", {"victim": 1, "timeout_s": TIMEOUT,
                                   "agent_pid": _agent_pid(hosts3, 1),
                                   "known_before_spawn": known_before_spawn})
    assert "lost" in res["error"] or "not available" in res["error"], res
    if known_before_spawn:
        assert "cannot spawn" in res["error"], res
        assert len(res["hooked"]) == 1 and "Killed(sig=9)" in res["hooked"][0], res


def test_agent_address_that_does_not_answer(hosts3):
    dead = f"tcp://{hosts3.net.net}.250:26600"
    res, _ = hosts3.run("bad_attach", {"workers": [hosts3.workers[0], dead],
                                       "timeout": 1.0})
    assert res["type"] == "HostUnreachableError"
    assert dead in res["error"] and "did not answer within 1.0 s" in res["error"], res
    assert res["took"] < 5


def test_agent_with_another_secret_is_refused_and_logged(hosts3):
    res, _ = hosts3.run("bad_attach", {"workers": hosts3.workers[:1], "timeout": 5.0},
                        secret=os.urandom(32).hex())
    assert res["type"] == "HostRefusedError", res
    assert "different job secret" in res["error"] and hosts3.workers[0] in res["error"]
    assert res["took"] < 3, res
    assert "refused a connection" in hosts3.log(0)
    assert hosts3.agents[0].poll() is None


def _agent_pid(hosts, i) -> int:
    """The agent's pid: nsenter, unshare and sh all exec, so it is the Popen's.  Read
    right after the start, the process may be between two of those execs, when its
    cmdline reads empty: look again for a moment."""
    import time
    pid = hosts.agents[i].pid
    cmd, end = b"", time.monotonic() + 5
    while b"monarch_cy._hosts.agent" not in cmd and time.monotonic() < end:
        assert hosts.agents[i].poll() is None, f"agent {i} died early:\n{hosts.log(i)}"
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
        time.sleep(0.01)
    assert b"monarch_cy._hosts.agent" in cmd
    return pid
