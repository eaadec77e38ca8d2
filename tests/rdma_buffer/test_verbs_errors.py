"""How the ibverbs backend turns a failed wait into the documented errors.

No device needed: the owner's liveness (``_watch.check_owner``) and its
service's answer (``_owner_call.request``) are stood in for.  The real paths run in the
soft-RoCE guest (``tests/rdma_buffer/test_buffer_guest.py``).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from monarch_cy._rdma_buffer import _owner_call, _verbs_backend, _watch
from monarch_cy._verbs import VerbsError, VerbsTimeout
from monarch_cy.rdma import BufferDroppedError, OwnerDiedError, RDMATimeoutError

H = SimpleNamespace(owner_key="ipc:///x/p1.0", buf_id=3, token=7)
COMPLETION = VerbsError(12, "IBV_WC_RETRY_EXC_ERR", "transport retry counter exceeded",
                        "completion", 0)


@pytest.fixture
def owner(monkeypatch):
    """``state["dead"]``: the runtime knows the owner died; ``state["answer"]``: what
    its service answers a ``check`` (an exception to raise, or None: alive)."""
    state = {"dead": False, "answer": None, "asked": 0}

    def check_owner(h):
        if state["dead"]:
            raise OwnerDiedError(cause="the process owning the buffer died: test")

    def request(h, op, args, timeout):
        assert op == "check" and args == (h.buf_id, h.token) and 1.0 <= timeout <= 10.0
        state["asked"] += 1
        if state["answer"] is not None:
            raise state["answer"]
    monkeypatch.setattr(_watch, "check_owner", check_owner)
    monkeypatch.setattr(_owner_call, "request", request)
    return state


def explain(e):
    import time
    return _verbs_backend._explain(H, e, True, time.monotonic() + 30)


def test_timeout_is_an_rdma_timeout(owner):
    err = explain(VerbsTimeout(110, "ETIMEDOUT", "0 of 1 completions arrived", "wait"))
    assert isinstance(err, RDMATimeoutError) and "did not complete within its timeout" in str(err)
    assert owner["asked"] == 0


def test_known_dead_owner_wins(owner):
    owner["dead"] = True
    for e in (COMPLETION, VerbsTimeout(110, "ETIMEDOUT", "x", "wait")):
        assert isinstance(explain(e), OwnerDiedError)


def test_error_completion_asks_the_owner(owner):
    owner["answer"] = BufferDroppedError("buffer 3 was dropped")
    assert isinstance(explain(COMPLETION), BufferDroppedError)
    owner["answer"] = OwnerDiedError(cause="died meanwhile")
    assert isinstance(explain(COMPLETION), OwnerDiedError)
    owner["answer"] = RDMATimeoutError("no answer")      # owner silent: the verbs error stands
    assert explain(COMPLETION) is COMPLETION
    owner["answer"] = None                                # owner alive: the verbs error stands
    assert explain(COMPLETION) is COMPLETION
    assert owner["asked"] == 4


def test_other_errors_pass_through(owner):
    died = OwnerDiedError(cause="seen by the check")
    assert explain(died) is died
    assert owner["asked"] == 0
