"""ValueMesh: one value per point of a mesh, the result of ``endpoint.call()``."""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

from monarch_cy._checks import is_int
from monarch_cy._actor.base.shape import Extent, MeshTrait, Point, Shape

__all__ = ["ValueMesh"]

R = TypeVar("R")


class ValueMesh(MeshTrait, Generic[R]):
    """Immutable mesh of values with the same named-dimension algebra as actor meshes.

    ``ValueMesh(extent_or_shape, values)``: ``values`` are in row-major (local rank)
    order.  Iterating yields ``(Point, value)`` pairs, as :meth:`items` does.
    """

    __slots__ = ("_shape", "_values")

    def __class_getitem__(cls, item):
        """``ValueMesh[T]`` is ``ValueMesh`` at run time, as Monarch's (so that
        ``isinstance(x, ValueMesh[int])`` works); type checkers still read the
        parameter."""
        return cls

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
            raise ValueError(f"index {rank} out of range (len={n})")      # Monarch's
        return self._values[self._shape.global_ranks()[rank]]

    def items(self) -> "Iterator[tuple[Point, R]]":
        """``(Point, value)`` pairs in local rank order."""
        ext = self._shape.extent
        return ((Point(i, ext), v) for i, v in enumerate(self.values()))

    def __iter__(self):
        return self.items()

    def item(self, **coords) -> R:
        """The value at ``coords``; every dimension must be named (none for a 0-dim mesh).

        Monarch's errors: ``KeyError(label)`` for a dimension not named, ``KeyError``
        ``item has extra dimensions: [...]`` for names this mesh does not have,
        ``IndexError`` ``rank <r> not in current shape`` for a coordinate out of range
        (``r`` computed as Monarch does; never another point's value)."""
        sh = self._shape
        coords = dict(coords)
        try:
            at = [coords.pop(label) for label in sh.labels]
        except KeyError as e:
            raise KeyError(e.args[0]) from None
        if coords:
            raise KeyError(f"item has extra dimensions: {list(coords)}")
        for label, c in zip(sh.labels, at):
            if not is_int(c):
                raise TypeError(f"item(): coordinate {label}={c!r} is not an int")
        g = sh.offset + sum(c * st for c, st in zip(at, sh.strides))
        if not all(0 <= c < n for c, n in zip(at, sh.sizes)):
            raise IndexError(f"rank {g} not in current shape")
        return self._values[g]

    def __reduce__(self):
        return (ValueMesh, (Shape.dense(self._shape.labels, self._shape.sizes),
                            self.values()))

    def __eq__(self, other):
        return isinstance(other, ValueMesh) and self.extent == other.extent and \
            self.values() == other.values()

    def __repr__(self):
        # Monarch's layout: the pretty-printed tuple of (Point, value), indented
        import pprint  # deferred: import time (printing a mesh is rare)
        import textwrap  # deferred: import time (as above)
        body = textwrap.indent(pprint.pformat(tuple(self.items())), "  ")
        return f"ValueMesh({self.extent!r}):\n{body}"
