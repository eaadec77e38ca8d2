"""Monarch's native ``Shape`` and ``Slice`` (``monarch._rust_bindings.monarch_hyperactor.shape``)
and ``monarch._src.actor.shape``'s ``ShapeExt`` and ``MeshTrait``, over monarch_cy's own
shape algebra.

monarch_cy's :class:`~monarch_cy._actor.base.shape.Shape` keeps labels as a tuple and
takes ``(labels, offset, sizes, strides)``; Monarch's native one is built from
``(labels, slice)``, reports ``labels`` as a list and raises its own exception types
(``ValueError`` for an unknown label or an index past the end, ``OverflowError`` for a
negative one, as the conversion to an unsigned integer in its binding does).  These
classes are what Monarch programs get under :mod:`monarch_cy.compat`; the arithmetic is
ours (a ``Shape`` here holds one of ours).

``Slice.new_row_major(sizes)`` is Monarch's: a dense row-major slice of the given sizes
from offset 0 (monarch_cy's ``NDSlice.new_row_major`` takes contiguous ranks instead).
A ``Slice`` equals an ``NDSlice`` with the same offset, sizes and strides.

``MeshTrait`` is Monarch's base for a mesh of the user's own: a subclass provides
``_ndslice`` (a ``Slice``), ``_labels`` and ``_new_with_shape(shape)`` (a ``Shape``
here) and gets ``slice``, ``split``, ``flatten``, ``rename``, ``size``, ``sizes``,
``extent`` and ``len()`` -- the same algebra as monarch_cy's own meshes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from monarch_cy._actor.base.shape import Extent, NDSlice, Shape as _OurShape

__all__ = ["Shape", "Slice", "ShapeExt", "MeshTrait"]


class Slice(NDSlice):
    """Monarch's ``Slice(offset=, sizes=, strides=)``."""

    __slots__ = ()

    @staticmethod
    def new_row_major(sizes) -> "Slice":
        sizes = [int(s) for s in sizes]
        strides, acc = [], 1
        for s in reversed(sizes):
            strides.append(acc)
            acc *= s
        return Slice(offset=0, sizes=sizes, strides=strides[::-1])

    @staticmethod
    def _of(ns: NDSlice) -> "Slice":
        return Slice(offset=ns.offset, sizes=ns.sizes, strides=ns.strides)

    def __repr__(self) -> str:
        return f"Slice(offset={self.offset}, sizes={self.sizes}, strides={self.strides})"


class Shape:
    """Monarch's native ``Shape(labels, slice)``: named dimensions over a slice of ranks.
    Immutable."""

    __slots__ = ("_s",)

    def __init__(self, labels, slice: NDSlice) -> None:
        if not isinstance(slice, NDSlice):
            raise TypeError(f"Shape(labels, slice): slice must be a Slice, got {slice!r}")
        labels = list(labels)
        if len(labels) != slice.ndim:
            raise ValueError(f"labels {labels} and slice {slice!r} differ in dimensions")
        self._s = _OurShape(labels, slice.offset, slice.sizes, slice.strides)

    @classmethod
    def _wrap(cls, ours: _OurShape) -> "Shape":
        obj = cls.__new__(cls)
        obj._s = ours
        return obj

    @property
    def labels(self) -> list:
        return list(self._s.labels)

    @property
    def ndslice(self) -> Slice:
        return Slice._of(self._s.ndslice)

    @staticmethod
    def unity() -> "Shape":
        return Shape._wrap(_OurShape.unity())

    def _check(self, label: str, index: int | None = None) -> int:
        if label not in self._s.labels:
            raise ValueError(f"Shape does not have dimension labeled {label!r} "
                             f"(labels {self.labels})")
        i = self._s.labels.index(label)
        if index is not None:
            index = index.__index__()
            if index < 0:
                raise OverflowError(f"can't convert negative index {index} to an unsigned "
                                    f"integer (dimension {label!r})")
            if index >= self._s.sizes[i]:
                raise ValueError(f"index {index} out of range for dimension {label!r} of "
                                 f"size {self._s.sizes[i]}")
        return i

    def at(self, label: str, index: int) -> "Shape":
        """The shape at ``index`` along ``label``; that dimension is removed."""
        self._check(label, index)
        return Shape._wrap(self._s.at(label, index))

    def select(self, label: str, slice: slice) -> "Shape":
        """The shape restricted along ``label`` by ``slice``; the dimension stays."""
        self._check(label)
        return Shape._wrap(self._s.select(label, slice))

    def index(self, **kwargs) -> "Shape":
        for label, index in kwargs.items():
            self._check(label, index)
        return Shape._wrap(self._s.index(**kwargs))

    def ranks(self) -> list:
        return self._s.ranks()

    def coordinates(self, rank: int) -> dict:
        return self._s.coordinates(rank)

    def __len__(self) -> int:
        return len(self._s)

    def __eq__(self, other) -> bool:
        return isinstance(other, Shape) and self._s == other._s

    def __hash__(self) -> int:
        return hash((tuple(self._s.labels), self._s.offset, self._s.sizes, self._s.strides))

    def __reduce__(self):
        return (Shape, (self.labels, self.ndslice))

    def __repr__(self) -> str:
        return f"Shape(labels={self.labels}, slice={self.ndslice!r})"


class ShapeExt:
    """Monarch's ``ShapeExt.slice(shape, **dims)``: an int removes a dimension, a
    ``slice`` keeps it restricted."""

    @staticmethod
    def slice(shape: Shape, **kwargs) -> Shape:
        for label, sel in kwargs.items():
            if label not in shape.labels:
                raise TypeError(f"Shape does not have dimension labeled {label!r}")
            if isinstance(sel, slice):
                shape = shape.select(label, sel)
            else:
                if sel < 0 or sel >= shape.ndslice.sizes[shape.labels.index(label)]:
                    raise IndexError(f"index {label}={sel} out of range")
                shape = shape.at(label, sel)
        return shape


class MeshTrait(ABC):
    """Monarch's ``MeshTrait`` (module docstring).  Each method builds the shape of
    this mesh from ``_labels`` and ``_ndslice``, applies monarch_cy's algebra, and
    hands the result to ``_new_with_shape``."""

    @property
    @abstractmethod
    def _ndslice(self) -> NDSlice: ...

    @property
    @abstractmethod
    def _labels(self): ...

    @abstractmethod
    def _new_with_shape(self, shape: Shape): ...

    def _our_shape(self) -> _OurShape:
        nd = self._ndslice
        return _OurShape(list(self._labels), nd.offset, nd.sizes, nd.strides)

    def _with(self, ours: _OurShape):
        return self._new_with_shape(Shape._wrap(ours))

    def slice(self, **kwargs):
        """``mesh.slice(batch=3, gpu=slice(2, 6))``: an int removes the dimension, a
        ``slice`` keeps it restricted."""
        return self._new_with_shape(ShapeExt.slice(Shape._wrap(self._our_shape()),
                                                   **kwargs))

    def split(self, **kwargs):
        """``mesh.split(host=("dp", "pp"), pp=16)``: dimensions split, row-major."""
        return self._with(self._our_shape().split(**kwargs))

    def flatten(self, name: str):
        """Every dimension into one named ``name`` (dense meshes only)."""
        return self._with(self._our_shape().flatten(name))

    def rename(self, **kwargs):
        """``mesh.rename(host="dp")``; dimensions not named are kept."""
        return self._with(self._our_shape().rename(**kwargs))

    def size(self, dim=None) -> int:
        """Elements in the mesh, or along ``dim`` (a name or a sequence of names);
        ``KeyError`` for a name the mesh lacks."""
        labels = list(self._labels)
        if dim is None:
            return len(self._ndslice)
        if isinstance(dim, str):
            if dim not in labels:
                raise KeyError(f"{self} does not have dimension {dim!r}")
            return self._ndslice.sizes[labels.index(dim)]
        n = 1
        for d in dim:
            n *= self.size(d)
        return n

    @property
    def sizes(self) -> dict:
        return dict(zip(self._labels, self._ndslice.sizes))

    @property
    def extent(self) -> Extent:
        return Extent(list(self._labels), list(self._ndslice.sizes))

    def __len__(self) -> int:
        return len(self._ndslice)
