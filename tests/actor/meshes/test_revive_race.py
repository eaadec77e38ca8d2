"""A respawn revives a proc while other threads call it (issue 35, item 2): no call
raises a stray ``KeyError``, every call resolves, and a call that fails part-way
leaves no port behind."""

import os
import signal
import sys
import threading
import time

import pytest

from _actors import Noter
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.cast import tree as cast_tree
from monarch_cy.actor import SupervisionError, this_host



class _RevivedAfterTheCheck(dict):
    """``node.dead`` whose entries vanish right after a membership test answers True:
    what a respawn in the pump does between a caller's check and its next read."""

    def __contains__(self, key):
        present = dict.__contains__(self, key)
        if present:
            self.pop(key, None)
        return present


def test_a_revive_between_check_and_read_is_no_keyerror(hook):
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        m = pm.spawn("rv", Noter)
        pid1 = m.slice(gpus=1).pid.call_one().get(10)
        os.kill(pid1, signal.SIGKILL)
        node = _state.get_node()
        key = m._procs[1]
        end = time.monotonic() + 10
        while key not in node.dead:
            assert time.monotonic() < end, "the kill was not noticed"
            time.sleep(0.02)
        cause = node.dead[key]
        for send in (lambda: m.slice(gpus=1).note.call_one(1),
                     lambda: m.note.call(2)):
            node.dead = _RevivedAfterTheCheck({key: cause})
            try:
                fut = send()           # before: KeyError from the second read
            finally:
                node.dead = {key: cause}
            with pytest.raises(SupervisionError):
                fut.get(5)
            held = [pid for pid in node.port_ids()
                    if getattr(node.port(pid), "fut", None) is fut]
            assert not held, "the failed call's port is still registered"
        pm.respawn([1]).get(30)
        assert m.note.call(3).get(10).values() == [3, 3]
    finally:
        pm.stop().get(30)


@pytest.mark.parametrize("nogil", [False, True], ids=["io_forwarders", "nogil_forwarders"])
def test_calls_while_a_thread_respawns_a_rank_in_a_loop(hook, monkeypatch, nogil):
    """With the nogil forwarders too: a cast a head's C thread passes on right after
    the respawn reaches the new incarnation (it was dropped at the first failed
    connect, and its call waited out its timeout)."""
    monkeypatch.setattr(cast_tree, "_FANOUT", 2)          # calls go down a tree too
    monkeypatch.setattr(cast_tree, "_NOGIL", nogil)
    old_switch = sys.getswitchinterval()
    pm = this_host().spawn_procs(per_host={"gpus": 5})
    m = pm.spawn("rl", Noter)
    m.note.call(0).get(30)
    node = _state.get_node()
    stop = threading.Event()
    rounds, stray, unresolved, answered = [0], [], [], [0]

    def respawner():
        try:
            while not stop.is_set() and rounds[0] < 8:
                p = pm._state.procs[2]
                os.kill(p.popen.pid, signal.SIGKILL)
                end = time.monotonic() + 10
                while p.key not in node.dead:
                    if time.monotonic() > end:
                        stray.append("kill not noticed")
                        return
                    time.sleep(0.001)
                pm.respawn([2]).get(30)
                rounds[0] += 1
        except BaseException as e:  # noqa: BLE001
            stray.append(f"respawner: {type(e).__name__}: {e}")
        finally:
            stop.set()

    def caller(which):
        i = 0
        while not stop.is_set():
            i += 1
            try:
                fut = (m.slice(gpus=2).note.call_one(i) if which % 2
                       else m.note.call(i))
            except SupervisionError:
                continue
            except BaseException as e:  # noqa: BLE001
                stray.append(f"{type(e).__name__}: {e!r}")
                continue
            try:
                fut.get(15)
                answered[0] += 1
            except SupervisionError:
                pass
            except TimeoutError:
                unresolved.append(i)
            except BaseException as e:  # noqa: BLE001
                stray.append(f"get: {type(e).__name__}: {e!r}")

    sys.setswitchinterval(1e-5)            # threads interleave as on a loaded machine
    try:
        threads = [threading.Thread(target=respawner)] + \
            [threading.Thread(target=caller, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
    finally:
        sys.setswitchinterval(old_switch)
        stop.set()
    try:
        assert not stray, stray[:5]
        assert not unresolved
        assert rounds[0] == 8 and answered[0] > 0
        assert m.note.call(-1).get(10).values() == [-1] * 5
    finally:
        pm.stop().get(30)
