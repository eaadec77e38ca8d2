"""``spawn_procs(bootstrap=fn)``: a setup callable run in every proc before its actors.

As in Monarch, the callable (``def`` or ``async def``, no arguments; it goes by
value, so a lambda or a notebook function works) runs inside an internal actor
spawned on the new mesh right away, so it can use ``current_rank()`` and the
proc's environment.  Ordering is enforced in the proc itself: a proc started with a
setup holds back the construction of every other actor (``__init__`` waits in the
actor's own thread, the proc keeps answering heartbeats) until the setup has
returned; actors the setup itself spawns are not held.  A respawned proc runs the
setup again, first, because the internal actor is re-spawned before the others.

If the callable raises, as in Monarch, that is an error of the setup *call*, not a
failure of an actor: ``ProcMesh.initialized`` raises it as :class:`ActorError`, so
does ``ProcMesh.spawn`` once that is known, every call on an actor spawned on that
proc meanwhile raises the same ``ActorError`` (the actor never runs its
``__init__``), and nothing reaches supervision or the client's
``unhandled_fault_hook``.
"""

from __future__ import annotations

import threading

from monarch_cy._errors import ActorError
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.model.actor import Actor, context
from monarch_cy._actor.model.endpoint import endpoint
from monarch_cy._transport import wire

__all__ = ["SETUP_NAME", "check", "start", "initialized", "failed", "arm",
           "hold_until_set_up"]

SETUP_NAME = "monarch_cy_setup"


class _Gate:
    """This proc's setup: open once it returned; ``error`` (the :class:`ActorError`
    every later call gets) set if it raised."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: ActorError | None = None
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


def hold_until_set_up(name: str, addr: str, owner) -> ActorError | None:
    """Called in an actor's thread before its ``__init__``: wait for this proc's
    setup (if any); the setup's :class:`ActorError` if it failed (the actor then
    answers every call with it instead of running), else None."""
    gate = _GATE
    if gate is None:
        return None
    if name == SETUP_NAME and gate.addr is None:
        gate.addr = addr
        return None
    if owner and owner[0] == "actor" and owner[1] == gate.addr:
        return None                 # spawned by the setup itself
    gate.done.wait()
    return gate.error


def _call_error(e: Exception) -> ActorError:
    """The setup's exception as the ActorError of Monarch's ``setup.setup`` call
    (the exception itself when it can travel, else its text in the traceback)."""
    import traceback  # deferred: import time (a failing setup is rare)
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    try:
        wire.loads(*wire.dumps(e))
    except Exception:  # noqa: BLE001 - any failure means it cannot travel
        e = None
    return ActorError(e, tb, "setup", context().actor_instance.rank.rank, "setup")


class _SetupActor(Actor):
    def __init__(self, fn) -> None:
        import inspect  # deferred: import time (only procs with a setup run this)
        gate = _GATE
        self.error = None
        try:
            result = fn()
            if inspect.isawaitable(result):
                import asyncio  # deferred: import time (only async setups need it)

                async def wait():
                    return await result
                asyncio.run(wait())
        except Exception as e:      # the setup call's error, not the actor's failure
            self.error = _call_error(e)
        finally:
            if gate is not None:
                gate.error = self.error
                gate.done.set()

    @endpoint
    def done(self):
        """True, or the setup's ActorError (returned, so that it arrives unwrapped)."""
        return True if self.error is None else self.error


def start(proc_mesh, fn):
    """Spawn the setup on ``proc_mesh`` and ask at once whether it ran (nothing
    waits on the answer here); returns its actor mesh, whose ``_initialized`` is the
    Future :func:`initialized` and :func:`failed` read."""
    setup_mesh = proc_mesh._spawn(SETUP_NAME, _SetupActor, (fn,), {})
    inner = setup_mesh.done.call()
    out = setup_mesh._initialized = Future._make(None)

    def done(f):
        exc = f.exception()
        if exc is None:
            exc = next((v for v in f.get().values() if isinstance(v, ActorError)), None)
        out._set_result(True) if exc is None else out._set_exception(exc)
    inner._then(done)
    return setup_mesh


def initialized(setup_mesh):
    """The Future ``ProcMesh.initialized`` gives: ``True`` once the setup ran in
    every proc, or the setup's error (an :class:`ActorError`)."""
    return setup_mesh._initialized


def failed(setup_mesh):
    """The setup's error once it is known to have raised (then ``ProcMesh.spawn``
    raises it, as Monarch's), else None."""
    fut = setup_mesh._initialized
    return fut.exception() if fut.done() else None
