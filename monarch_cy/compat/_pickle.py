"""Monarch's ``monarch._src.actor.pickle.flatten`` / ``unflatten``: pickle an object
with some of the objects inside it kept out of the bytes.

``flatten(obj, filter)`` returns ``(values, buffer)``: every object inside ``obj``
for which ``filter(o)`` is true is left out of the pickle and listed in ``values``
(each occurrence, in the order met, as Monarch's) with a reference to its place;
``buffer.freeze()`` gives the bytes.  ``unflatten(data, values)`` rebuilds ``obj`` from those bytes, putting
``values`` back in their places.  The pickling is monarch_cy's (cloudpickle), so
whatever crosses a mesh pickles here the same way (a ``HostMesh`` of remote hosts
unpickles as a reference to the same hosts, :mod:`monarch_cy._actor.meshes.host_refs`).
"""

from __future__ import annotations

import io
import pickle
from typing import Any, Callable, Iterable

__all__ = ["flatten", "unflatten", "Buffer"]


class Buffer:
    """The pickled bytes of :func:`flatten` (Monarch's ``Buffer``: ``freeze()``)."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def freeze(self) -> bytes:
        return self._data

    def __len__(self) -> int:
        return len(self._data)


def flatten(obj: Any, filter: Callable[[Any], bool]) -> tuple[list, Buffer]:
    """``(values kept out, pickled bytes)`` of ``obj`` (module docstring)."""
    import cloudpickle  # deferred: import time (only a program that flattens)
    if not callable(filter):
        raise TypeError(f"filter must be a callable object -> bool, not {filter!r}")
    values: list = []

    class _Pickler(cloudpickle.Pickler):
        def persistent_id(self, o):
            if filter(o):
                values.append(o)
                return len(values) - 1
            return None

    out = io.BytesIO()
    _Pickler(out, protocol=5).dump(obj)
    return values, Buffer(out.getvalue())


def unflatten(data, values: Iterable[Any]) -> Any:
    """The object :func:`flatten` pickled, with ``values`` back in their places."""
    vals = list(values)

    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            try:
                return vals[pid]
            except (IndexError, TypeError):
                raise pickle.UnpicklingError(f"unflatten: no value {pid!r} among the "
                                             f"{len(vals)} given") from None

    if isinstance(data, Buffer):
        data = data.freeze()
    return _Unpickler(io.BytesIO(bytes(data))).load()
