"""The client's failures: the grace period, "seen", "recovered", and the fault hook.

Supervision as a whole (failures travel up the ownership tree, as in Monarch):

Vocabulary
----------
* A **failure** is a proc that died or stopped answering heartbeats, or an actor
  that failed: its ``__init__`` raised, a ``broadcast`` endpoint raised (nowhere to
  reply), an endpoint raised a ``BaseException`` that is not an ``Exception``
  (``SystemExit``, ``KeyboardInterrupt``), or it left a child's failure unhandled.
  A failed actor runs ``__cleanup__(exc)`` (not when ``__init__`` failed: there is
  no instance) and then answers every call, pending or new, with
  :class:`SupervisionError`; its proc keeps serving its other actors.
* The **owner** of an actor mesh is whoever spawned it: an actor (a child mesh it
  spawned inside an endpoint or ``__init__``, on any procs of the job) or the
  *client* (the controller's plain code).  Procs are always owned by the client.
* The owner gets a :class:`MeshFailure`, one per failed rank, wherever the child
  ran (``monarch_cy._actor.host.child_failures``).  An actor owner's
  ``__supervise__(failure)`` runs on its loop (async actors) or its thread; a truthy
  result handles it; a falsy result, an exception, no ``__supervise__`` or one that
  does not return within ``supervise_timeout()`` fails the owner in turn (its failure
  names the child's), which reaches *its* owner, and so on.
* By default, as in Monarch, every failure the client owns reaches the hook as soon
  as the client hears of it, one the program already saw as a ``SupervisionError``
  included; only a restart policy (monarch_cy's; Monarch has none) handles it first.
  And as in Monarch, each later call the client makes to an actor that had already
  failed or stopped (its proc still up) reaches the hook too, as an "undeliverable
  message" failure (:func:`client_undeliverable`), besides failing that call.
* With ``monarch_cy.actor.fault_hook_skips_seen = True`` (monarch_cy's opt-in;
  ``MONARCH_CY_FAULT_HOOK_SKIPS_SEEN=1``) the client has ``FAULT_GRACE_S`` (default
  1 s, ``MONARCH_CY_FAULT_GRACE``) to handle a failure: it does when the program
  called ``respawn`` or ``stop`` on its proc mesh, or *saw* it (some call on the
  failed proc or actor raised ``SupervisionError``, pending when it failed or made
  later); undeliverable calls are seen by definition and never reach the hook.
* A failure nobody handled runs ``monarch_cy.actor.unhandled_fault_hook(failure)``,
  in a thread of its own (a hook that blocks delays nothing else).  As in Monarch,
  the default hook calls ``sys.exit(1)``, and a hook that raises leaves the fault
  unhandled: the report is printed to stderr and the main thread gets a
  ``KeyboardInterrupt`` (at its next
  Python instruction: a main thread blocked in ``Future.get`` wakes at once); a hook
  that returns drops it.  Replace it by assignment:
  ``monarch_cy.actor.unhandled_fault_hook = fn``.
  It runs exactly once per unhandled failure; under the opt-in, failures still
  within their grace when the interpreter exits get it at exit
  (:func:`flush_at_exit`), before the procs are stopped, rather than being lost.
* Stopping a mesh on purpose is not a failure.
"""

from __future__ import annotations

import sys
import threading
import time

from monarch_cy import _config
from monarch_cy._actor.base.failure import MeshFailure
from monarch_cy._transport.current import current_node

__all__ = ["unhandled_fault_hook", "fault_hook_skips_seen", "FAULT_GRACE_S",
           "client_failure", "client_undeliverable", "has_pending", "note_seen",
           "forget_seen", "note_recovered", "flush_at_exit", "HOOK_CALLS"]

FAULT_GRACE_S = _config.fault_grace()      # MONARCH_CY_FAULT_GRACE, read once

#: monarch_cy's opt-in: a failure the program saw as a ``SupervisionError`` is handled
#: (does not reach the hook).  Assign ``monarch_cy.actor.fault_hook_skips_seen``.
fault_hook_skips_seen: bool = _config.fault_hook_skips_seen()


# -- the default hook ---------------------------------------------------------

def unhandled_fault_hook(failure: MeshFailure) -> None:
    """Called with a failure nobody handled (see the module docstring).

    Monarch's default: ``sys.exit(1)``.  A hook that raises (anything, ``SystemExit``
    included) leaves the fault unhandled: the report is printed to stderr
    (``Unhandled monarch error on the root actor, hostname=..., PID=... at time
    ...:``) and the controller's main thread gets a ``KeyboardInterrupt`` (a program
    that does not catch it exits 130).  A hook that returns drops the fault.  Assign
    ``monarch_cy.actor.unhandled_fault_hook`` to change it.
    """
    sys.exit(1)


def _interrupt_main(failure: MeshFailure) -> None:
    """The fault stays unhandled: print Monarch's report and interrupt the main
    thread (it is the one that can finalize the interpreter)."""
    import datetime  # deferred: import time (a fault is rare)
    import os  # deferred: import time (as above)
    import socket  # deferred: import time (as above)
    message = (f"Unhandled monarch error on the root actor, hostname="
               f"{socket.gethostname()}, PID={os.getpid()} at time "
               f"{datetime.datetime.now()}:\n{failure.report()}\n")
    try:
        sys.stderr.write(message)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed stderr must not stop the interrupt
        pass
    main = threading.main_thread()
    if not main.is_alive():
        return
    _raise_in(main, KeyboardInterrupt)
    node = current_node()
    if node is not None:
        node.wake_direct()      # a main thread blocked in Future.get() looks up


def _raise_in(thread, exc_type, settle_s: float = 5.0) -> None:
    """Raise ``exc_type`` in ``thread`` at its next Python instruction (a signal would
    not do: SIGINT may be ignored, as in a background shell).  Not while a thread is
    being started: CPython (3.11) gives a new thread's state its *creator's* id until
    the new thread runs, so an exception aimed at the creator then lands in the new
    thread instead (seen: the main thread blocked in ``Thread.start()`` forever).
    Holding ``threading``'s limbo lock with no thread in limbo closes that window for
    threads started through ``threading`` (up to ``settle_s`` seconds of waiting)."""
    import contextlib  # deferred: import time (a fault is rare)
    import ctypes  # deferred: as above
    lock = getattr(threading, "_active_limbo_lock", None) or contextlib.nullcontext()
    limbo = getattr(threading, "_limbo", {})
    deadline = time.monotonic() + settle_s
    while True:
        with lock:
            if not limbo or time.monotonic() > deadline:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                           ctypes.py_object(exc_type))
                return
        time.sleep(0.001)


def _skips_seen() -> bool:
    mod = sys.modules.get("monarch_cy.actor")
    return bool(getattr(mod, "fault_hook_skips_seen", fault_hook_skips_seen)
                if mod is not None else fault_hook_skips_seen)


def _current_hook():
    mod = sys.modules.get("monarch_cy.actor")
    hook = getattr(mod, "unhandled_fault_hook", None) if mod is not None else None
    return hook if callable(hook) else unhandled_fault_hook


def _run_hook(failure: MeshFailure) -> None:
    try:
        _current_hook()(failure)
    except BaseException:  # noqa: BLE001 - sys.exit included: the fault is unhandled
        _interrupt_main(failure)


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
                   handled: bool = False, seen: bool = False) -> None:
    """A failure owned by the client: unless ``handled`` (a restart policy took it),
    the hook runs now (Monarch's rule) or, under ``fault_hook_skips_seen``, after the
    grace unless the program handles it meanwhile.  ``seen``: a pending call already
    failed with it.  ``keys``: proc keys / actor addresses whose failing calls count
    as the program having seen it (only under the opt-in).  Thread-safe."""
    if not _skips_seen():
        if not handled:
            _start_hook(failure)
        return
    now = time.monotonic()
    keys = frozenset(keys)
    with _lock:
        if seen or any(now - _seen_recent.get(k, -1e9) < FAULT_GRACE_S + 1 for k in keys):
            handled = True
        p = _Pending(failure, keys, state, handled)
        _pending.append(p)
    node.add_timer(FAULT_GRACE_S, lambda: _expire(p))


def client_undeliverable(failure: MeshFailure) -> None:
    """A call of the client reached an actor that had already failed or stopped:
    Monarch's hook hears of it (``failure``: :func:`.failure.undeliverable`); under
    ``fault_hook_skips_seen`` the failed call is the program seeing it, and nothing
    runs.  Thread-safe."""
    if not _skips_seen():
        _start_hook(failure)


def has_pending() -> bool:
    """Whether some failure is still within its grace period."""
    with _lock:
        return bool(_pending)


def note_seen(key) -> None:
    """A call on ``key`` (proc key or actor address) raised SupervisionError."""
    if not _skips_seen():
        return
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
    _start_hook(p.failure)


def _start_hook(failure: MeshFailure) -> None:
    with _lock:
        HOOK_CALLS.append((time.monotonic(), failure))
        del HOOK_CALLS[:-100]
    threading.Thread(target=_run_hook, args=(failure,), daemon=True,
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
