"""Actors whose results cannot travel, for tests/actor/test_actor_host.py
(importable by the worker procs)."""

from __future__ import annotations

from monarch_cy.actor import Actor, endpoint


class RefusesToPickle:
    """Pickling raises ``exc_type`` (not one of pickle's own errors)."""

    def __init__(self, exc_type=ValueError):
        self.exc_type = exc_type

    def __reduce__(self):
        raise self.exc_type("this object refuses to be pickled")


class FailsToUnpickle:
    """Pickles fine; unpickling it (in the caller) raises."""

    def __reduce__(self):
        return (_explode, ("unpickled in the wrong place",))


def _explode(msg):
    raise ValueError(msg)


def nested(depth: int):
    out = []
    for _ in range(depth):
        out = [out]
    return out


class BadResults(Actor):
    def __init__(self):
        self.served = 0

    @endpoint
    def refuses(self, exc_name="ValueError"):
        self.served += 1
        import builtins
        return RefusesToPickle(getattr(builtins, exc_name))

    @endpoint
    def too_deep(self):
        self.served += 1
        return nested(200_000)

    @endpoint
    def unpicklable_here(self):
        self.served += 1
        return FailsToUnpickle()

    @endpoint
    def count(self):
        self.served += 1
        return self.served


class AsyncBadResults(Actor):
    @endpoint
    async def refuses(self):
        return RefusesToPickle(ValueError)

    @endpoint
    async def ping(self, x):
        return x
