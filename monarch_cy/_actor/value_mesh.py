"""ValueMesh: one value per point of a mesh, the result of ``endpoint.call()``."""

from __future__ import annotations

from typing import Any, Iterator

from monarch_cy._actor.errors import MeshIndexError
from monarch_cy._actor.shape import Extent, MeshTrait, Point, Shape

__all__ = ["ValueMesh"]


class ValueMesh(MeshTrait):
    """Immutable mesh of values with the same named-dimension algebra as actor meshes.

    ``ValueMesh(extent_or_shape, values)``: ``values`` are in row-major (local rank)
    order.  Iterating yields ``(Point, value)`` pairs, as :meth:`items` does.
    """

    __slots__ = ("_shape", "_values")

    def __init__(self, shape, values) -> None:
        if isinstance(shape, Extent):
            shape = Shape.dense(shape.labels, shape.sizes)
        if not isinstance(shape, Shape):
            raise TypeError(f"shape must be an Extent or Shape, not {shape!r}")
        values = list(values)
        if shape.offset == 0 and len(values) != len(shape) and \
                len(values) < max(shape.global_ranks(), default=-1) + 1:
            raise ValueError(f"{len(values)} values do not fill a mesh of {len(shape)}")
        self._shape = shape
        self._values = values

    def _new_with_shape(self, shape: Shape) -> "ValueMesh":
        return ValueMesh(shape, self._values)

    def values(self) -> list:
        """Values in local rank order."""
        vals = self._values
        return [vals[g] for g in self._shape.global_ranks()]

    def items(self) -> Iterator:
        """``(Point, value)`` pairs in local rank order."""
        ext = self._shape.extent
        return ((Point(i, ext), v) for i, v in enumerate(self.values()))

    def __iter__(self):
        return self.items()

    def item(self, **coords) -> Any:
        """The value at ``coords``; every dimension must be named (none for a 0-dim mesh)."""
        missing = [l for l in self._shape.labels if l not in coords]
        if missing:
            raise MeshIndexError(f"item() needs a coordinate for every dimension; "
                                 f"missing {missing!r}")
        sub = self._shape.slice(**coords)
        return self._values[sub.offset]

    def __reduce__(self):
        return (ValueMesh, (Shape.dense(self._shape.labels, self._shape.sizes),
                            self.values()))

    def __eq__(self, other):
        return isinstance(other, ValueMesh) and self.extent == other.extent and \
            self.values() == other.values()

    def __repr__(self):
        return f"ValueMesh({self.sizes!r}, {self.values()!r})"
