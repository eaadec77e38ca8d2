"""Python ``logging`` inside actors: each record names the actor that logged it.

In a worker proc, a record made while an actor runs (its endpoint, ``__init__``,
``__cleanup__``...) gets Monarch's prefix in its message: ``record.msg`` becomes
``"[actor=<root>.<module.Class name{'gpus': 0/2}>] " + msg`` (the actor as Monarch
names it in failure texts) and ``record.actor_prefix`` holds the prefix, so every
handler -- the proc's streams, a ``FileHandler`` the actor added -- shows it.  A
record with an empty message is left alone (``torch.compile``'s structured trace
logs one and needs it empty), as in Monarch.  Records made outside actors (the
proc's own threads) and in the controller are not changed.

Done with a log-record factory wrapped around the one in place (``install``, once
per process), so handlers added later are covered without patching ``logging``.
"""

from __future__ import annotations

from monarch_cy._actor.base import state as _state

__all__ = ["install"]

_installed = [False]


def _prefix() -> str | None:
    inst = getattr(_state.local, "instance", None)
    host = getattr(inst, "host", None)
    return None if host is None else f"[actor={host.who}] "


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
