"""An actor whose ``__init__`` runs long (monarch_cy._actor.host.init_guard): its
mesh's stop resolves without waiting for it, calls after the stop fail at once, the
proc still stops; messages sent during a slow ``__init__`` are handled, in order, once
it returns."""

from __future__ import annotations

import threading
import time

import pytest

from monarch_cy.actor import (Actor, Channel, MeshStoppedError, endpoint,
                              this_host)


class Forever(Actor):
    def __init__(self, port):
        port.send("in __init__")
        threading.Event().wait()

    @endpoint
    def never(self):
        return "unreachable"


class Slow(Actor):
    def __init__(self, seconds):
        time.sleep(seconds)
        self.seen = []

    @endpoint
    def note(self, x):
        self.seen.append(x)
        return list(self.seen)


class AsyncSlow(Actor):
    def __init__(self, seconds):
        time.sleep(seconds)
        self.seen = []

    @endpoint
    async def note(self, x):
        self.seen.append(x)
        return list(self.seen)


def test_stop_of_an_actor_whose_init_never_returns_resolves():
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    send, recv = Channel.open()
    m = pm.spawn("forever", Forever, send)
    assert recv.recv().get(30) == "in __init__"
    pending = m.never.call()                       # waits behind __init__
    t = time.monotonic()
    assert m.stop().get(30) == ()
    assert time.monotonic() - t < 10
    with pytest.raises(MeshStoppedError, match="while its __init__ was running"):
        pending.get(10)                            # refused with the stop
    with pytest.raises(MeshStoppedError):
        m.never.call().get(10)
    t = time.monotonic()
    pm.stop().get(30)
    assert time.monotonic() - t < 10


@pytest.mark.parametrize("cls", [Slow, AsyncSlow])
def test_calls_sent_during_a_slow_init_are_handled_in_order_after_it(cls):
    pm = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        m = pm.spawn("slow", cls, 1.5)             # past the guard's grace
        futs = [m.note.call_one(i) for i in range(5)]
        assert [f.get(30) for f in futs][-1] == [0, 1, 2, 3, 4]
        assert m.note.call_one(5).get(10) == [0, 1, 2, 3, 4, 5]
    finally:
        pm.stop().get(30)
