"""Supervision: failures travel up the ownership tree, as in Monarch.

Vocabulary
----------
* A **failure** is a proc that died or stopped answering heartbeats, or an actor
  that failed: its ``__init__`` raised, a ``broadcast`` endpoint raised (nowhere to
  reply), an endpoint raised a ``BaseException`` that is not an ``Exception``
  (``SystemExit``, ``KeyboardInterrupt``), or it left a child's failure unhandled.
  A failed actor runs ``__cleanup__(exc)`` (not when ``__init__`` failed: there is
  no instance) and then answers every call, pending or new, with
  :class:`SupervisionError`; its proc keeps serving its other actors.
* The **owner** of an actor mesh is whoever spawned it: an actor (a child mesh
  spawned with ``this_proc().spawn`` inside an endpoint) or the *client* (the
  controller's plain code).  Procs are always owned by the client.
* The owner gets a :class:`MeshFailure`.  An actor owner's ``__supervise__(failure)``
  runs on its own thread; a truthy result handles it; a falsy result, an exception,
  no ``__supervise__`` or one that does not return within ``supervise_timeout()``
  fails the owner in turn (its failure names the child's), which reaches *its*
  owner, and so on.
* The client handles a failure when (a) the program *saw* it: some call on the
  failed proc or actor raised ``SupervisionError`` (pending when it failed, or made
  later), or (b) the program called ``respawn`` or ``stop`` on its proc mesh, or a
  restart policy respawned it, within ``FAULT_GRACE_S`` (default 1 s,
  ``MONARCH_CY_FAULT_GRACE``) of the failure.  Otherwise
  ``monarch_cy.actor.unhandled_fault_hook(failure)`` runs, in a thread of its own
  (a hook that blocks delays nothing else).  The default hook raises a
  ``SupervisionError`` carrying the report in the controller's main thread (at its
  next Python instruction: a main thread blocked in ``Future.get`` wakes at once).
  Replace it by assignment: ``monarch_cy.actor.unhandled_fault_hook = fn``.
  It runs exactly once per unhandled failure; failures still within their grace
  when the interpreter exits get it at exit (:func:`flush_at_exit`), before the
  procs are stopped, rather than being lost.
* Stopping a mesh on purpose is not a failure.
"""

from __future__ import annotations

import pickle
import sys
import threading
import time

from monarch_cy._checks import is_int, is_number
from monarch_cy import _config
from monarch_cy._actor.errors import SupervisionError
from monarch_cy._transport.protocol import (HEARTBEAT, HEARTBEAT_ACK, REVIVE, SEEN,
                                           SUPERVISE)


__all__ = ["MeshFailure", "RestartPolicy", "unhandled_fault_hook", "FAULT_GRACE_S",
           "supervise_timeout", "HEARTBEAT", "HEARTBEAT_ACK", "SUPERVISE", "REVIVE",
           "SEEN"]



FAULT_GRACE_S = _config.fault_grace()      # MONARCH_CY_FAULT_GRACE, read once


def supervise_timeout() -> float:
    """Seconds a ``__supervise__``/``__cleanup__`` may take before it counts as hung
    (``MONARCH_CY_SUPERVISE_TIMEOUT``, default 10; read in the actor's proc)."""
    return _config.supervise_timeout()


class MeshFailure:
    """What an owner's ``__supervise__`` (or the fault hook) receives.

    Attributes: ``mesh_name`` (the actor mesh, or the proc mesh for a proc
    failure), ``ranks`` (tuple of failed ranks: the actor's rank in its mesh, or the
    proc's rank in its proc mesh), ``cause`` (one line: exit code, signal name,
    missed heartbeats, the exception), ``kind`` (``"proc"`` or ``"actor"``),
    ``children`` (the unhandled child failures that caused this one).
    ``report()`` is the full text (with the remote traceback when there is one);
    ``str(failure)`` is the report.  Picklable.
    """

    __slots__ = ("mesh_name", "ranks", "cause", "kind", "details", "children", "addrs")

    def __init__(self, mesh_name: str, ranks, cause: str, kind: str = "actor",
                 details: str = "", children=(), addrs=()) -> None:
        self.mesh_name = str(mesh_name)
        self.ranks = tuple(ranks)
        self.cause = str(cause)
        self.kind = kind
        self.details = str(details)
        self.children = tuple(children)
        self.addrs = tuple(addrs)

    @property
    def rank(self):
        """The first failed rank (or None)."""
        return self.ranks[0] if self.ranks else None

    def report(self) -> str:
        what = "proc mesh" if self.kind == "proc" else "actor mesh"
        ranks = ", ".join(map(str, self.ranks))
        out = f"{what} {self.mesh_name!r} rank(s) {ranks} failed: {self.cause}"
        if self.details:
            out += "\n" + self.details.rstrip()
        for c in self.children:
            out += "\n  caused by: " + c.report().replace("\n", "\n  ")
        return out

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        return (f"MeshFailure(mesh_name={self.mesh_name!r}, ranks={self.ranks!r}, "
                f"cause={self.cause!r})")

    def __reduce__(self):
        return (MeshFailure, (self.mesh_name, self.ranks, self.cause, self.kind,
                              self.details, self.children, self.addrs))

    def error(self) -> SupervisionError:
        """This failure as a :class:`SupervisionError` (actor, first rank, report)."""
        return SupervisionError(self.mesh_name, self.rank, self.report())


class RestartPolicy:
    """Respawn failed ranks of a proc mesh automatically.

    ``max_restarts`` respawns in all for the mesh (then failures go to the fault
    hook as usual); before the n-th one, wait ``min(backoff_s * factor**(n-1),
    max_backoff_s)``.  A failure the policy respawns counts as handled.
    """

    __slots__ = ("max_restarts", "backoff_s", "factor", "max_backoff_s")

    def __init__(self, max_restarts: int = 3, backoff_s: float = 0.1, factor: float = 2.0,
                 max_backoff_s: float = 5.0) -> None:
        if not is_int(max_restarts) or max_restarts < 0:
            raise ValueError(f"max_restarts must be an int >= 0, not {max_restarts!r}")
        for n, v in (("backoff_s", backoff_s), ("max_backoff_s", max_backoff_s)):
            if not is_number(v) or v < 0:
                raise ValueError(f"{n} must be a number >= 0, not {v!r}")
        if not is_number(factor) or factor < 1:
            raise ValueError(f"factor must be a number >= 1, not {factor!r}")
        self.max_restarts, self.backoff_s = max_restarts, float(backoff_s)
        self.factor, self.max_backoff_s = float(factor), float(max_backoff_s)

    def delay(self, n: int) -> float:
        """Seconds to wait before the n-th restart (n >= 1)."""
        return min(self.backoff_s * self.factor ** max(0, n - 1), self.max_backoff_s)

    def __repr__(self):
        return (f"RestartPolicy(max_restarts={self.max_restarts}, "
                f"backoff_s={self.backoff_s}, factor={self.factor}, "
                f"max_backoff_s={self.max_backoff_s})")


# -- the default hook ---------------------------------------------------------

def unhandled_fault_hook(failure: MeshFailure) -> None:
    """Called with a failure nobody handled (see the module docstring).

    Default: raise ``SupervisionError`` with the report in the controller's main
    thread.  Assign ``monarch_cy.actor.unhandled_fault_hook`` to change it.
    """
    from monarch_cy._log import logger
    logger("actor").error("unhandled failure: %s", failure.report())
    _raise_in_main(failure)


def _raise_in_main(failure: MeshFailure) -> None:
    import ctypes
    main = threading.main_thread()
    if not main.is_alive():
        return
    args = (failure.mesh_name, failure.rank, failure.report())

    def init(self):
        SupervisionError.__init__(self, *args)
    # PyThreadState_SetAsyncExc takes a class: make one that carries the report.
    cls = type("SupervisionError", (SupervisionError,), {
        "__init__": init, "__module__": SupervisionError.__module__,
        "__reduce__": lambda self: (SupervisionError, args)})
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main.ident),
                                               ctypes.py_object(cls))
    from monarch_cy._transport.node import current_node
    node = current_node()
    if node is not None:
        node.wake_direct()      # a main thread blocked in Future.get() looks up


def _current_hook():
    mod = sys.modules.get("monarch_cy.actor")
    hook = getattr(mod, "unhandled_fault_hook", None) if mod is not None else None
    return hook if callable(hook) else unhandled_fault_hook


def _run_hook(failure: MeshFailure) -> None:
    try:
        _current_hook()(failure)
    except BaseException:
        from monarch_cy._log import logger
        logger("actor").exception("unhandled_fault_hook raised")


# -- the client's side: grace, "seen", "recovered" ----------------------------

class _Pending:
    __slots__ = ("failure", "keys", "state", "handled")

    def __init__(self, failure, keys, state, handled):
        self.failure, self.keys, self.state, self.handled = failure, keys, state, handled


_lock = threading.Lock()
_pending: list = []
_seen_recent: dict = {}      # key -> time it was last seen failing (before the report)
HOOK_CALLS = []              # (time, failure): for tests and diagnostics (bounded)


def client_failure(node, failure: MeshFailure, keys, state=None,
                   handled: bool = False) -> None:
    """Register a failure owned by the client; the hook runs after the grace unless
    it is handled meanwhile.  ``keys``: proc keys / actor addresses whose failing
    calls count as the program having seen it.  Thread-safe."""
    now = time.monotonic()
    keys = frozenset(keys)
    with _lock:
        if any(now - _seen_recent.get(k, -1e9) < FAULT_GRACE_S + 1 for k in keys):
            handled = True
        p = _Pending(failure, keys, state, handled)
        _pending.append(p)
    node.add_timer(FAULT_GRACE_S, lambda: _expire(p))


def note_seen(key) -> None:
    """A call on ``key`` (proc key or actor address) raised SupervisionError."""
    with _lock:
        _seen_recent[key] = time.monotonic()
        if len(_seen_recent) > 4096:
            cut = time.monotonic() - 60
            for k in [k for k, t in _seen_recent.items() if t < cut]:
                del _seen_recent[k]
        for p in _pending:
            if key in p.keys:
                p.handled = True


def forget_seen(keys) -> None:
    """``keys`` belong to a new incarnation: earlier sightings say nothing of it."""
    with _lock:
        for k in keys:
            _seen_recent.pop(k, None)


def note_recovered(state) -> None:
    """The program respawned or stopped the proc mesh ``state``."""
    with _lock:
        for p in _pending:
            if p.state is state:
                p.handled = True


def _expire(p: _Pending) -> None:
    with _lock:
        try:
            _pending.remove(p)
        except ValueError:
            return
        if p.handled:
            return
        HOOK_CALLS.append((time.monotonic(), p.failure))
        del HOOK_CALLS[:-100]
    threading.Thread(target=_run_hook, args=(p.failure,), daemon=True,
                     name="monarch_cy-fault-hook").start()


def flush_at_exit(settle: float = 0.05, hook_timeout: float = 5.0) -> int:
    """Interpreter exit: run the hook now for every failure still within its grace
    and not handled (they would be lost with the process); returns how many.

    Waits ``settle`` seconds first, so that a proc that died just before exit is
    reported by the pump; each hook runs in a thread of its own and is given
    ``hook_timeout`` seconds.  The default hook cannot raise in a main thread that
    has finished, so at exit it prints the report."""
    time.sleep(settle)
    with _lock:
        due = [p for p in _pending if not p.handled]
        _pending.clear()
        for p in due:
            HOOK_CALLS.append((time.monotonic(), p.failure))
        del HOOK_CALLS[:-100]
    for p in due:
        t = threading.Thread(target=_run_hook, args=(p.failure,), daemon=True,
                             name="monarch_cy-fault-hook")
        t.start()
        t.join(hook_timeout)
    return len(due)


# -- message handlers -----------------------------------------------------------

def handle_supervise(node, hdr, data, extras) -> None:
    """SUPERVISE in the controller: an actor owned by the client failed."""
    failure = pickle.loads(data)
    from monarch_cy._actor import proc_failure, proc_mesh
    state, handled = None, False
    for a in failure.addrs:
        home = proc_mesh.ACTOR_HOME.get(a)
        if home is not None:
            state = home[0]
            state.failed_ranks.add(home[1])
    if state is not None:
        handled = proc_failure._maybe_restart(node, state, failure)
    client_failure(node, failure, failure.addrs, state, handled)


def handle_seen(node, hdr, data, extras) -> None:
    note_seen(hdr[1])


def send_failure_to_client(node, client_addr: str, failure: MeshFailure) -> None:
    from monarch_cy._transport.protocol import pack
    node.send(client_addr, [pack((SUPERVISE,), pickle.dumps(failure))])


def call_with_timeout(fn, timeout: float, inst=None):
    """Run ``fn()`` in a helper thread (with ``inst`` as its actor context);
    ``(True, value)``, ``(False, exc)`` if it raised, or ``(False, TimeoutError)`` if
    it did not return within ``timeout`` (the thread is left running).  A coroutine
    result is run to completion there."""
    box = []

    def run():
        if inst is not None:
            from monarch_cy._actor.actor import _set_current
            _set_current(inst)
        try:
            v = fn()
            if hasattr(v, "__await__") and hasattr(v, "send"):
                import asyncio
                v = asyncio.run(v)
            box.append((True, v))
        except BaseException as e:  # noqa: BLE001 - reported to the caller
            box.append((False, e))
    t = threading.Thread(target=run, daemon=True, name="monarch_cy-supervise")
    t.start()
    t.join(timeout)
    if not box:
        return False, TimeoutError(f"did not return within {timeout} s")
    return box[0]
