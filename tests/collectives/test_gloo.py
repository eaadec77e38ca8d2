"""GlooGroup's lifetime (close, abort, finalizer, forked child) on one-rank groups."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import pytest
import torch

from monarch_cy._collectives import _gloo
from monarch_cy._errors import ResourceClosedError
from monarch_cy.collectives import GlooGroup, GroupAbortedError, pick_free_port

ROOT = Path(__file__).resolve().parents[2]


def _group() -> GlooGroup:
    return GlooGroup(0, 1, "127.0.0.1", pick_free_port(), timeout=10)


@pytest.fixture
def shutdowns(monkeypatch):
    """The process groups that ``_shutdown`` released, in order (the real one still runs)."""
    seen: list = []
    real = _gloo._shutdown

    def spy(pg):
        seen.append(pg)
        real(pg)

    monkeypatch.setattr(_gloo, "_shutdown", spy)
    return seen


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_dropped_group_is_released_by_its_finalizer(shutdowns):
    gc.collect()
    before = _threads()
    g = _group()
    pg = g._pg
    assert _threads() > before  # gloo's worker threads (and the store's)
    del g
    gc.collect()
    assert shutdowns == [pg]
    del pg, shutdowns[:]
    gc.collect()
    assert _threads() <= before


def test_close_is_idempotent_and_releases_at_once(shutdowns):
    g = _group()
    pg = weakref.ref(g._pg)
    g.close()
    assert len(shutdowns) == 1 and shutdowns[0] is pg()
    shutdowns[:] = ["first close"]
    gc.collect()
    assert pg() is None  # close() dropped the process group: its threads are gone
    g.close()
    g.abort()  # after close: nothing left to abort
    assert shutdowns == ["first close"] and g.closed and g.aborted is None
    with pytest.raises(ResourceClosedError, match="GlooGroup is closed"):
        g.all_reduce(torch.ones(1))
    with pytest.raises(ResourceClosedError):
        g.split(0)
    del g
    gc.collect()
    assert shutdowns == ["first close"]  # the finalizer was detached


def test_abort_is_idempotent_and_later_calls_raise(shutdowns):
    g = _group()
    pg = weakref.ref(g._pg)
    g.abort("testing")
    assert len(shutdowns) == 1 and shutdowns[0] is pg()
    shutdowns[:] = ["first abort"]
    gc.collect()
    assert pg() is None
    g.abort("again")
    g.close()
    assert shutdowns == ["first abort"]
    assert g.aborted == "testing" and g.closed and "aborted (testing)" in repr(g)
    for call in (lambda: g.all_reduce(torch.ones(1)), g.barrier, lambda: g.split(0)):
        with pytest.raises(GroupAbortedError, match="GlooGroup was aborted: testing"):
            call()


def test_with_block_closes_or_aborts(shutdowns):
    with _group() as g:
        g.all_reduce(torch.ones(1))
    assert g.closed and g.aborted is None
    with pytest.raises(KeyError):
        with _group() as h:
            raise KeyError("boom")
    assert h.aborted == "abort() was called"
    assert len(shutdowns) == 2


def test_split_child_keeps_its_parent_alive(shutdowns):
    g = _group()
    parent_pg = g._pg
    child = g.split(0)
    del g
    gc.collect()
    assert shutdowns == []  # the child holds its parent
    t = torch.ones(2)
    child.all_reduce(t)
    assert t.tolist() == [1.0, 1.0]
    child_pg = child._pg
    del child
    gc.collect()
    assert shutdowns == [child_pg, parent_pg]


def test_forked_child_releases_nothing_and_does_not_hang():
    """In a fork, dropping or closing a group must neither shut the parent's
    process group down nor destroy it (its destructor would join threads the
    child does not have: it hangs), also through the child's interpreter exit."""
    code = textwrap.dedent("""
        import gc, os, sys, time
        import torch
        from monarch_cy._collectives import _gloo
        from monarch_cy.collectives import GlooGroup, pick_free_port

        real = _gloo._shutdown
        def spy(pg):
            print("SHUTDOWN", os.getpid(), flush=True)
            real(pg)
        _gloo._shutdown = spy

        dropped = GlooGroup(0, 1, "127.0.0.1", pick_free_port(), timeout=10)
        closed = GlooGroup(0, 1, "127.0.0.1", pick_free_port(), timeout=10)
        pid = os.fork()
        if pid == 0:
            del dropped
            gc.collect()
            closed.close()
            del closed
            gc.collect()
            sys.exit(0)  # a normal exit: interpreter shutdown runs in the child
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print("CHILD HUNG", flush=True)
            sys.exit(1)
        print("CHILD EXIT", os.waitstatus_to_exitcode(status), flush=True)
        t = torch.ones(2)
        dropped.all_reduce(t)
        closed.all_reduce(t)
        print("PARENT OK", t.tolist(), os.getpid(), flush=True)
        dropped.close()
        closed.close()
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    out = p.stdout
    assert p.returncode == 0, out + p.stderr
    assert "CHILD EXIT 0" in out
    parent = out.split("PARENT OK ")[1].split()[-1]
    shut = [line.split()[1] for line in out.splitlines() if line.startswith("SHUTDOWN")]
    assert shut == [parent, parent], out  # only the parent's close() calls shut down
