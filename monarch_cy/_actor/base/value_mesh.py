"""ValueMesh: one value per point of a mesh, the result of ``endpoint.call()``."""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

from monarch_cy._checks import is_int
from monarch_cy._errors import MeshIndexError
from monarch_cy._actor.base.shape import Extent, MeshTrait, Point, Shape

__all__ = ["ValueMesh"]

R = TypeVar("R")


class ValueMesh(MeshTrait, Generic[R]):
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

    def values(self) -> "list[R]":
        """Values in local rank order."""
        vals = self._values
        return [vals[g] for g in self._shape.global_ranks()]

    def get(self, rank: int) -> R:
        """The value at local rank ``rank`` (row-major order of this mesh's points)."""
        n = len(self._shape)
        if not is_int(rank):
            raise TypeError(f"rank must be an int, not {rank!r}")
        if not 0 <= rank < n:
            raise MeshIndexError(f"rank {rank} is out of range for a mesh of {n} values")
        return self._values[self._shape.global_ranks()[rank]]

    def items(self) -> "Iterator[tuple[Point, R]]":
        """``(Point, value)`` pairs in local rank order."""
        ext = self._shape.extent
        return ((Point(i, ext), v) for i, v in enumerate(self.values()))

    def __iter__(self):
        return self.items()

    def item(self, **coords) -> R:
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
        # Monarch's layout: ValueMesh({procs: 2}):\n  (({'procs': 0/2}, v0),\n   ...)
        rows = [f"({p!r}, {v!r})" for p, v in self.items()]
        body = ",\n   ".join(rows)
        return f"ValueMesh({self.extent!r}):\n  ({body})"
