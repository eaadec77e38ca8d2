"""Owner liveness as seen by a reader: supervision events and pid checks.

* :func:`check_owner` raises :class:`OwnerDiedError` at once when the actor
  runtime already knows the owner's proc is dead.
* :func:`watching` registers a reply receiver for the duration of an operation;
  when the runtime reports the owner's proc dead (its supervision callback
  ``node.on_proc_failed``, run in the pump), the receiver gets the error, so a
  waiting reader wakes with ``OwnerDiedError`` instead of waiting for its timeout.
* :func:`died_error` builds the error for a pid that is gone or reused (the
  same-host backends notice the death themselves, through ESRCH or the pid's
  start time).
"""

from __future__ import annotations

import contextlib
import threading

from monarch_cy._errors import OwnerDiedError
from monarch_cy._rdma_buffer import _identity

__all__ = ["check_owner", "watching", "died_error", "owner_gone", "on_death"]

_lock = threading.Lock()
_pending: dict[str, set] = {}
_listeners: list = []          # fn(proc_key, cause), see on_death
_installed_node = None


def _install(node) -> None:
    global _installed_node
    if _installed_node is node:
        return
    with _lock:
        if _installed_node is not node:
            node.on_proc_failed.append(_on_failed)
            _installed_node = node


def _on_failed(proc_key: str, cause: str) -> None:
    with _lock:
        receivers = _pending.pop(proc_key, ())
        listeners = list(_listeners)
    for r in list(receivers):
        r.deliver(None, False, died_error(proc_key, cause))
    for fn in listeners:
        fn(proc_key, cause)


def on_death(fn) -> None:
    """Call ``fn(proc_key, cause)`` (in the pump) whenever the runtime reports a proc
    dead to this process; registering the same ``fn`` again does nothing."""
    from monarch_cy._actor.base.state import get_node
    _install(get_node())
    with _lock:
        if fn not in _listeners:
            _listeners.append(fn)


def died_error(owner: str, cause: str) -> OwnerDiedError:
    return OwnerDiedError(cause=f"the process owning the buffer ({owner}) died: {cause}")


def check_owner(h) -> None:
    from monarch_cy._actor.base.state import get_node
    node = get_node()
    _install(node)
    cause = node.dead.get(h.owner_key)
    if cause is not None:
        raise died_error(h.owner_key, cause)


def owner_gone(h) -> bool:
    """True when the owner's pid no longer names the owner (same host only)."""
    return _identity.start_time(h.owner_pid) != h.owner_start


@contextlib.contextmanager
def watching(h, receiver):
    """Deliver ``OwnerDiedError`` into ``receiver`` if ``h``'s owner dies meanwhile."""
    from monarch_cy._actor.base.state import get_node
    node = get_node()
    _install(node)
    with _lock:
        _pending.setdefault(h.owner_key, set()).add(receiver)
    try:
        cause = node.dead.get(h.owner_key)
        if cause is not None:
            raise died_error(h.owner_key, cause)
        yield receiver
    finally:
        with _lock:
            s = _pending.get(h.owner_key)
            if s is not None:
                s.discard(receiver)
                if not s:
                    _pending.pop(h.owner_key, None)
