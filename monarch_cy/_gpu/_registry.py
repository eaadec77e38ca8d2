"""The classes that a module of this package makes but may not import.

A ``Device`` makes buffers, streams and events (``buffer()``, ``stream()``,
``event()``), a ``Stream`` makes events (``record_event()``) and ``DeviceMemory``
makes IPC handles (``ipc_handle()``).  Each of those classes is defined in a module
above the one that makes it, and needs that module (a ``Stream`` is on a ``Device``),
so the maker looks the class up here by name instead of importing it.  Each class
registers itself where it is defined (``@provide``); :mod:`monarch_cy._gpu` imports
every module, so all of them are here once any module is imported.
"""

from __future__ import annotations

__all__ = ["CLASSES", "provide"]

CLASSES: dict[str, type] = {}


def provide(cls: type) -> type:
    """Class decorator: register ``cls`` under its name in :data:`CLASSES`."""
    CLASSES[cls.__name__] = cls
    return cls
