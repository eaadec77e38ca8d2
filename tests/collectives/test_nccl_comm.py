"""NcclCommunicator's lifetime without a GPU: the NCCL shim's destroy/abort and
the runtime are replaced by recorders, the communicator is built around a fake
handle (as ``split()`` builds its children)."""

from __future__ import annotations

import contextlib
import gc
from types import SimpleNamespace

import pytest

from monarch_cy import _nccl_shim
from monarch_cy._collectives import _nccl_comm
from monarch_cy._collectives._group import Group
from monarch_cy._errors import ResourceClosedError
from monarch_cy.collectives import GroupAbortedError, NcclCommunicator, NcclError
from monarch_cy._gpu import _device


class Calls(list):
    """What the fakes were asked to do; ``fail["abort"]`` makes commAbort fail."""

    fail: dict


@pytest.fixture
def calls(monkeypatch):
    seen = Calls()
    fail = {"abort": False}

    def comm_abort(handle):
        seen.append(("abort", handle))
        if fail["abort"]:
            raise NcclError(6, "remote process exited", "", "CommAbort")

    monkeypatch.setattr(_nccl_shim, "commAbort", comm_abort)
    fake_nccl = SimpleNamespace(commDestroy=lambda h: seen.append(("destroy", h)))
    monkeypatch.setattr(_nccl_comm, "_nccl", lambda: fake_nccl)
    fake_rt = SimpleNamespace(
        eventSynchronize=lambda ev: seen.append(("sync", ev)),
        eventQuery=lambda ev: True,
        eventDestroy=lambda ev: seen.append(("event_destroy", ev)),
    )
    monkeypatch.setattr(_nccl_comm, "_rt", lambda: fake_rt)
    monkeypatch.setattr(_device, "on_device", lambda ordinal: contextlib.nullcontext())
    seen.fail = fail
    return seen


def _comm(handle: int) -> NcclCommunicator:
    c = NcclCommunicator.__new__(NcclCommunicator)
    Group.__init__(c, 0, 1, 10.0)
    c._adopt(handle)
    c.device, c.nonblocking, c._orphans = 0, True, []
    return c


def test_close_destroys_after_dropped_work_and_is_idempotent(calls):
    c = _comm(11)
    c._orphans.append((99, ("buffer",)))
    assert c.handle == 11
    c.close()
    c.close()
    c.abort()  # after close: nothing left to abort
    assert calls == [("sync", 99), ("event_destroy", 99), ("destroy", 11)]
    assert c.aborted is None and c._orphans == []
    with pytest.raises(ResourceClosedError, match="NcclCommunicator is closed"):
        c.handle
    del c
    gc.collect()
    assert calls[-1] == ("destroy", 11)  # no finalizer left to abort it


def test_abort_is_idempotent_and_later_calls_raise(calls):
    c = _comm(12)
    c.abort("peer died")
    c.abort()
    c.close()
    assert calls == [("abort", 12)]
    assert c.aborted == "peer died" and c.closed
    with pytest.raises(GroupAbortedError, match="NcclCommunicator was aborted: peer died"):
        c.handle
    with pytest.raises(GroupAbortedError):
        c.barrier()


def test_abort_of_a_broken_communicator_swallows_its_nccl_error(calls):
    calls.fail["abort"] = True
    c = _comm(13)
    c.abort()
    assert calls == [("abort", 13)] and c.aborted == "abort() was called"


def test_dropped_communicator_is_aborted_never_destroyed(calls):
    _comm(14)
    calls.fail["abort"] = True
    _comm(15)  # its NcclError is swallowed by the finalizer as well
    gc.collect()
    assert sorted(calls) == [("abort", 14), ("abort", 15)]


def test_split_child_owns_its_handle(calls, monkeypatch):
    parent = _comm(16)
    nccl = SimpleNamespace(
        SPLIT_NOCOLOR=-1,
        commSplit=lambda h, c, k, blocking: (7, False),
        splitPeek=lambda slot: 1,
        splitResult=lambda slot: 17,
        commGetAsyncError=lambda h: 0,
        commCount=lambda h: 1,
        commUserRank=lambda h: 0,
        commDestroy=lambda h: calls.append(("destroy", h)),
    )
    monkeypatch.setattr(_nccl_comm, "_nccl", lambda: nccl)
    child = parent.split(0)
    assert (child.rank, child.size, child.handle, child._parent) == (0, 1, 17, parent)
    del child
    gc.collect()
    assert calls == [("abort", 17)]  # the child's own finalizer, not the parent's
    parent.close()
    assert calls == [("abort", 17), ("destroy", 16)]


def test_check_is_callable_and_reports_an_async_error(calls, monkeypatch):
    # Group's `check=` argument once shadowed the documented comm.check() method.
    c = _comm(21)
    state = {"err": 0}
    fake = SimpleNamespace(commGetAsyncError=lambda h: state["err"],
                           commDestroy=lambda h: calls.append(("destroy", h)))
    monkeypatch.setattr(_nccl_comm, "_nccl", lambda: fake)
    assert callable(c.check) and c.check() is None          # no error: returns
    polled = []
    monkeypatch.setattr(c, "_poll", lambda op, limit, ev: polled.append(op))
    state["err"] = 5
    c.check()
    assert polled == ["check"]                              # an error goes to _poll
    c.close()
