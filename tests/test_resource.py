"""The lifetime base (monarch_cy._resource): Owned and Abortable, with fake
release functions that record their calls (no runtime needed)."""

from __future__ import annotations

import gc
import os
import sys
import threading
import weakref

import pytest

from monarch_cy._errors import GroupAbortedError
from monarch_cy._errors import ResourceClosedError
from monarch_cy._resource import Abortable, Owned


class Token:
    """An argument of a release function that can be watched with a weakref."""


class Res(Owned):
    def __init__(self, calls: list, token=None, fail: bool = False) -> None:
        super().__init__()
        self._own(_record, calls, token or Token(), fail)

    def use(self) -> str:
        self._check_open()
        return "ok"


class PinnedRes(Res):
    _pin_in_child = True


def _record(calls: list, token, fail: bool, what: str = "release") -> None:
    calls.append((what, token))
    if fail:
        raise RuntimeError("release failed")


def _abort_fn(calls: list, token) -> None:
    calls.append(("abort", token))


class Ab(Abortable):
    _aborted_error = GroupAbortedError

    def __init__(self, calls: list) -> None:
        super().__init__()
        self.calls = calls
        self.token = Token()
        self._own(_abort_fn, calls, self.token)
        self.gate: threading.Event | None = None

    def _close_owned(self, release, args) -> None:
        if self.gate is not None:
            self.gate.wait(10)
        self.calls.append(("close", args[1]))

    def use(self) -> str:
        self._check_open()
        return "ok"


@pytest.fixture
def forked(monkeypatch):
    """Pretend to be a forked child: os.getpid() no longer matches the creator's."""
    def enter():
        pid = os.getpid()
        monkeypatch.setattr(os, "getpid", lambda: pid + 1)
    return enter


def test_owned_close_releases_once_and_then_refuses():
    calls: list = []
    r = Res(calls)
    assert r.use() == "ok" and not r.closed
    r.close()
    r.close()
    assert [c[0] for c in calls] == ["release"] and r.closed
    with pytest.raises(ResourceClosedError, match="Res is closed"):
        r.use()
    with pytest.raises(ResourceClosedError):
        with r:
            pass
    del r
    gc.collect()
    assert len(calls) == 1  # the finalizer was detached by close()


def test_owned_close_error_propagates_but_counts_as_closed():
    calls: list = []
    r = Res(calls, fail=True)
    with pytest.raises(RuntimeError, match="release failed"):
        r.close()
    assert r.closed
    r.close()
    assert len(calls) == 1


def test_owned_finalizer_releases_quietly():
    calls: list = []
    Res(calls)
    Res(calls, fail=True)  # its error is swallowed
    gc.collect()
    assert [c[0] for c in calls] == ["release", "release"]


def test_owned_finalizer_does_nothing_at_shutdown(monkeypatch):
    calls: list = []
    r = Res(calls)
    monkeypatch.setattr(sys, "is_finalizing", lambda: True)
    r._finalizer()  # what garbage collection during shutdown runs
    monkeypatch.undo()
    assert calls == []


def test_owned_frees_nothing_in_a_forked_child(forked):
    calls: list = []
    a, b = Res(calls), Res(calls)
    forked()
    a.close()
    assert a.closed
    del a, b
    gc.collect()
    assert calls == []


def test_pin_in_child_keeps_the_arguments_alive(forked):
    calls: list = []
    t_closed, t_dropped, t_plain = Token(), Token(), Token()
    w = [weakref.ref(t) for t in (t_closed, t_dropped, t_plain)]
    a, b, c = PinnedRes(calls, t_closed), PinnedRes(calls, t_dropped), Res(calls, t_plain)
    del t_closed, t_dropped, t_plain
    forked()
    a.close()
    del a, b, c
    gc.collect()
    assert calls == []
    # pinned (close and finalizer) survive; an unpinned argument is dropped as before
    assert [x() is not None for x in w] == [True, True, False]


def test_abortable_close_runs_the_orderly_release():
    calls: list = []
    r = Ab(calls)
    r.close()
    r.close()
    r.abort()  # after close: nothing left to abort
    assert calls == [("close", r.token)] and r.aborted is None and r.closed
    with pytest.raises(ResourceClosedError, match="Ab is closed") as e:
        r.use()
    assert not isinstance(e.value, GroupAbortedError)


def test_abortable_abort_is_idempotent_and_refuses_with_the_reason():
    calls: list = []
    r = Ab(calls)
    r.abort("peer died")
    r.abort("again")
    r.close()
    assert calls == [("abort", r.token)]
    assert r.aborted == "peer died" and r.closed
    with pytest.raises(GroupAbortedError, match="Ab was aborted: peer died"):
        r.use()
    with pytest.raises(ResourceClosedError):
        with r:
            pass
    assert Ab([]).use() == "ok"


def test_abortable_default_reason_and_default_error():
    class Plain(Abortable):
        pass

    p = Plain()
    p.abort()
    assert p.aborted == "abort() was called"
    with pytest.raises(ResourceClosedError, match="Plain was aborted: abort"):
        p._check_open()


def test_abortable_finalizer_runs_the_abort_function():
    calls: list = []
    Ab(calls)
    gc.collect()
    assert [c[0] for c in calls] == ["abort"]


def test_abortable_abort_in_a_forked_child_frees_nothing(forked):
    calls: list = []
    r = Ab(calls)
    forked()
    r.abort("x")
    assert r.aborted == "x" and calls == []


def test_abort_from_another_thread_does_not_release_twice():
    calls: list = []
    r = Ab(calls)
    r.gate = threading.Event()
    t = threading.Thread(target=r.close)
    t.start()
    while not r.closed:
        pass
    r.abort("from another thread")  # close() already running: returns at once
    assert calls == [] and r.aborted is None
    r.gate.set()
    t.join(10)
    assert calls == [("close", r.token)]


def test_only_one_taker_wins():
    calls: list = []
    r = Ab(calls)
    fin = r._finalizer
    assert r._take() is not None
    r._finalizer = fin  # a second caller that read the same finalizer
    assert r._take() is None

