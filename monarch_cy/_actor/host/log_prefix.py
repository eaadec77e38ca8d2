"""Python ``logging`` records name the actor that made them, as Monarch's.

A record made while an actor runs (its endpoint, ``__init__``, ``__cleanup__``...)
gets Monarch's prefix in its message: ``record.msg`` becomes
``"[actor=<root>.<module.Class name{'gpus': 0/2}>] " + msg`` (the actor as Monarch
names it in failure texts) and ``record.actor_prefix`` holds the prefix, so every
handler -- the proc's streams, a ``FileHandler`` the actor added -- shows it.  In the
client, a record made in a thread (or task) that has used ``context()`` gets
``[actor=<root>] `` (Monarch sets its context variable there).  A record with an
empty message is left alone (``torch.compile``'s structured trace logs one and needs
it empty), as in Monarch; so is every record while
``monarch.actor.config.prefix_python_logs_with_actor`` is False.  Other records (a
worker's own threads, a client thread that never used ``context()``) are not
changed.

Done with a log-record factory wrapped around the one in place (``install``, once
per process: a worker's set-up, the controller's runtime), so handlers added later
are covered without patching ``logging``.
"""

from __future__ import annotations

from monarch_cy._actor.base import actor_config
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.model.actor import client_context_used

__all__ = ["install"]

_installed = [False]


def _prefix() -> str | None:
    if not actor_config.prefix_python_logs_with_actor:
        return None
    inst = getattr(_state.local, "instance", None)
    host = getattr(inst, "host", None)
    if host is not None:
        return f"[actor={host.who}] "
    return "[actor=<root>] " if client_context_used.get() else None


def install() -> None:
    """Prefix the records made in actors from now on (idempotent)."""
    if _installed[0]:
        return
    _installed[0] = True
    import logging  # deferred: import time (the controller imports this module too)
    make = logging.getLogRecordFactory()

    def record(*args, **kwargs):
        rec = make(*args, **kwargs)
        try:
            prefix = _prefix()
            if prefix is not None:
                rec.actor_prefix = prefix
                if rec.msg:
                    rec.msg = f"{prefix}{rec.msg}"
        except Exception:  # noqa: BLE001 - never fail a log call over its prefix
            pass
        return rec

    logging.setLogRecordFactory(record)
