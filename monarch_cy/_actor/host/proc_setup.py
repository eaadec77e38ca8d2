"""``spawn_procs(bootstrap=fn)``: a setup callable run in every proc before its actors.

As in Monarch, the callable (``def`` or ``async def``, no arguments; it goes by
value, so a lambda or a notebook function works) runs inside an internal actor
spawned on the new mesh right away, so it can use ``current_rank()`` and the
proc's environment.  Ordering is enforced in the proc itself: a proc started with a
setup holds back the construction of every other actor (``__init__`` waits in the
actor's own thread, the proc keeps answering heartbeats) until the setup has
returned; actors the setup itself spawns are not held.  A respawned proc runs the
setup again, first, because the internal actor is re-spawned before the others.

If the callable raises, the internal actor fails: the failure is reported through
supervision like any actor failure (the client's ``unhandled_fault_hook`` by
default), ``ProcMesh.initialized`` raises it, and every actor later spawned on that
proc fails in ``__init__`` with an error naming the setup's exception.
"""

from __future__ import annotations

import threading

from monarch_cy._actor.base.future import Future
from monarch_cy._actor.model.actor import Actor
from monarch_cy._actor.model.endpoint import endpoint
from monarch_cy._transport import wire

__all__ = ["SETUP_NAME", "check", "start", "initialized", "arm", "hold_until_set_up"]

SETUP_NAME = "monarch_cy_setup"


class _Gate:
    """This proc's setup: open once it returned; ``error`` set if it raised."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: str | None = None
        self.addr: str | None = None        # the setup actor's address


_GATE: _Gate | None = None


def check(bootstrap):
    """``bootstrap`` when it is None or a callable that can be sent to the procs;
    else ``TypeError`` naming ``bootstrap`` (before any proc is started)."""
    if bootstrap is None:
        return None
    if not callable(bootstrap):
        raise TypeError(f"bootstrap must be a callable taking no arguments (def or "
                        f"async def) or None, not {bootstrap!r}")
    try:
        wire.dumps(bootstrap)
    except TypeError as e:
        raise TypeError(f"bootstrap {_name(bootstrap)} cannot be sent to the procs it "
                        f"runs in (it is pickled, by value where it cannot be imported "
                        f"by name): {e}") from None
    return bootstrap


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def arm() -> None:
    """In a proc started with a setup: hold other actors until it has run."""
    global _GATE
    _GATE = _Gate()


def hold_until_set_up(name: str, addr: str, owner) -> None:
    """Called in an actor's thread before its ``__init__``: wait for this proc's
    setup (if any); raise ``RuntimeError`` naming its error if it failed."""
    gate = _GATE
    if gate is None:
        return
    if name == SETUP_NAME and gate.addr is None:
        gate.addr = addr
        return
    if owner and owner[0] == "actor" and owner[1] == gate.addr:
        return                      # spawned by the setup itself
    gate.done.wait()
    if gate.error is not None:
        raise RuntimeError(f"this proc's bootstrap (spawn_procs(bootstrap=...)) failed: "
                           f"{gate.error}")


class _SetupActor(Actor):
    def __init__(self, fn) -> None:
        import inspect  # deferred: import time (only procs with a setup run this)
        gate = _GATE
        try:
            result = fn()
            if inspect.isawaitable(result):
                import asyncio  # deferred: import time (only async setups need it)

                async def wait():
                    return await result
                asyncio.run(wait())
        except BaseException as e:
            if gate is not None:
                gate.error = f"{type(e).__name__}: {e}"
                gate.done.set()
            raise
        if gate is not None:
            gate.done.set()

    @endpoint
    def done(self) -> bool:
        return True


def start(proc_mesh, fn):
    """Spawn the setup on ``proc_mesh``; returns its actor mesh (for
    :func:`initialized`).  Nothing waits on it here, so a failure nobody asks
    about reaches the fault hook."""
    return proc_mesh._spawn(SETUP_NAME, _SetupActor, (fn,), {})


def initialized(setup_mesh):
    """The Future ``ProcMesh.initialized`` gives: ``True`` once the setup ran in
    every proc, or its first failure (asking counts as seeing the failure)."""
    return Future._once(setup_mesh.done.call(), True)
