"""Named-dimension mesh algebra: :class:`Extent`, :class:`Point`, :class:`Shape`,
:class:`NDSlice` (Monarch's ``Slice``: the strided view without names).

A *shape* maps the points of a named, multi-dimensional index space onto *global
ranks* (positions in the underlying flat list of procs or actors) through an offset
and one stride per dimension, like a strided array view.  Slicing, splitting,
flattening and renaming make new shapes without touching the underlying list.

:class:`MeshTrait` gives every mesh (proc, actor, value) the same algebra; a mesh
only implements ``_shape`` and ``_new_with_shape``.  Ranks seen by users
(``Point.rank``, ``len``) are *local* ranks: row-major positions inside the shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Iterator, Sequence

from monarch_cy._errors import MeshIndexError

__all__ = ["Extent", "Point", "Shape", "NDSlice", "MeshTrait"]


def _check_labels(labels) -> tuple:
    labels = tuple(labels)
    for lab in labels:
        if not isinstance(lab, str) or not lab.isidentifier():
            raise ValueError(f"dimension name {lab!r} is not a Python identifier")
    if len(set(labels)) != len(labels):
        raise ValueError(f"dimension names {labels!r} repeat a name")
    return labels


class Extent(Mapping):
    """Sizes of named dimensions, in order: ``Extent(["hosts", "gpus"], [2, 4])``.

    A read-only mapping from label to size; ``nelements`` is the product.
    """

    __slots__ = ("_labels", "_sizes")

    def __init__(self, labels: Sequence[str], sizes: Sequence[int]) -> None:
        labels = _check_labels(labels)
        sizes = tuple(int(s) for s in sizes)
        if len(labels) != len(sizes):
            raise ValueError(f"labels {labels!r} and sizes {sizes!r} differ in length")
        for lab, s in zip(labels, sizes):
            if s < 0:
                raise ValueError(f"size of dimension {lab!r} is {s}; it must be >= 0")
        self._labels = labels
        self._sizes = sizes

    # lists, as Monarch's Extent gives them (a fresh one each time: the extent stays
    # immutable)
    labels = property(lambda self: list(self._labels))
    sizes = property(lambda self: list(self._sizes))

    @property
    def nelements(self) -> int:
        n = 1
        for s in self._sizes:
            n *= s
        return n

    def __getitem__(self, label: str) -> int:
        try:
            return self._sizes[self._labels.index(label)]
        except ValueError:
            raise KeyError(label) from None

    def __iter__(self):
        return iter(self._labels)

    def __len__(self) -> int:
        return len(self._labels)

    def __eq__(self, other):
        return (isinstance(other, Extent) and self._labels == other._labels
                and self._sizes == other._sizes)

    def __hash__(self):
        return hash((self._labels, self._sizes))

    def __repr__(self):
        # Monarch's text: {hosts: 2, gpus: 4}
        inner = ", ".join(f"{k}: {v}" for k, v in zip(self._labels, self._sizes))
        return f"{{{inner}}}"

    def __reduce__(self):
        return (Extent, (self._labels, self._sizes))

    def point(self, rank: int) -> "Point":
        return Point(rank, self)


class Point(Mapping):
    """One position in an :class:`Extent`: a mapping label -> coordinate, with ``rank``.

    ``rank`` is the row-major index of the point in its extent.
    """

    __slots__ = ("_rank", "_extent")

    def __init__(self, rank: int, extent: Extent) -> None:
        rank = int(rank)
        if not 0 <= rank < max(extent.nelements, 1):
            raise MeshIndexError(f"rank {rank} is outside extent {extent!r}")
        self._rank = rank
        self._extent = extent

    rank = property(lambda self: self._rank)
    extent = property(lambda self: self._extent)

    def _coords(self) -> tuple:
        out = []
        r = self._rank
        for s in reversed(self._extent._sizes):
            out.append(r % s if s else 0)
            r = r // s if s else 0
        return tuple(reversed(out))

    def __getitem__(self, label: str) -> int:
        try:
            i = self._extent._labels.index(label)
        except ValueError:
            raise KeyError(label) from None
        return self._coords()[i]

    def __iter__(self):
        return iter(self._extent._labels)

    def __len__(self) -> int:
        return len(self._extent._labels)

    def size(self, label: str) -> int:
        return self._extent[label]

    def __eq__(self, other):
        return isinstance(other, Point) and self._rank == other._rank and \
            self._extent == other._extent

    def __hash__(self):
        return hash((self._rank, self._extent))

    def __repr__(self):
        # Monarch's text: {'hosts': 0/2, 'gpus': 3/4} (coordinate / size)
        ext = self._extent
        inner = ", ".join(f"{k!r}: {c}/{n}" for k, c, n in
                          zip(ext.labels, self._coords(), ext.sizes))
        return f"{{{inner}}}"

    def __reduce__(self):
        return (Point, (self._rank, self._extent))


class NDSlice:
    """Monarch's ``NDSlice``: ``offset`` plus ``sizes`` and ``strides`` per dimension,
    a compact list of ranks (``NDSlice(offset=0, sizes=[2, 3], strides=[3, 1])`` is
    ranks 0..5).  Immutable; ranks are iterated in row-major order.

    ``index(rank)``/``coordinates(rank)`` find a rank (``ValueError`` if it is not
    in the slice); ``nditem(coords)`` and ``get(i)``/``s[i]`` go the other way
    (``IndexError`` out of bounds).
    """

    __slots__ = ("_offset", "_sizes", "_strides")

    def __init__(self, *, offset: int, sizes, strides) -> None:
        sizes, strides = [int(x) for x in sizes], [int(x) for x in strides]
        if len(sizes) != len(strides):
            raise ValueError(f"sizes {sizes} and strides {strides} differ in length")
        if any(x < 0 for x in sizes) or int(offset) < 0:
            raise ValueError(f"offset {offset} and sizes {sizes} must be >= 0")
        self._offset, self._sizes, self._strides = int(offset), sizes, strides

    offset = property(lambda self: self._offset)
    sizes = property(lambda self: list(self._sizes))
    strides = property(lambda self: list(self._strides))
    ndim = property(lambda self: len(self._sizes))

    def __len__(self) -> int:
        n = 1
        for x in self._sizes:
            n *= x
        return n

    def nditem(self, coordinates) -> int:
        coordinates = list(coordinates)
        if len(coordinates) != len(self._sizes) or any(
                not 0 <= c < n for c, n in zip(coordinates, self._sizes)):
            raise IndexError(f"coordinates {coordinates} are out of bounds for sizes "
                             f"{self._sizes}")
        return self._offset + sum(c * st for c, st in zip(coordinates, self._strides))

    def _coords_of(self, i: int) -> list:
        out = []
        for n in reversed(self._sizes):
            out.append(i % n)
            i //= n
        return out[::-1]

    def get(self, index: int) -> int:
        n = len(self)
        if not 0 <= index < n:
            raise IndexError(f"index {index} is out of range for a slice of {n}")
        return self.nditem(self._coords_of(index))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self.get(j) for j in range(*i.indices(len(self))))
        i = i.__index__()
        return self.get(i + len(self) if i < 0 else i)

    def __iter__(self):
        return (self.get(i) for i in range(len(self)))

    def coordinates(self, value: int) -> list:
        rest = int(value) - self._offset
        # strides may be in any order: peel off the largest first
        order = sorted(range(len(self._sizes)), key=lambda d: -self._strides[d])
        coords = [0] * len(self._sizes)
        for d in order:
            st = self._strides[d]
            c = rest // st if st else 0
            if not 0 <= c < self._sizes[d]:
                break
            coords[d] = c
            rest -= c * st
        if rest != 0 or len(self) == 0 or self.nditem(coords) != int(value):
            raise ValueError(f"value {value} is not in {self!r}")
        return coords

    def index(self, value: int) -> int:
        i = 0
        for c, n in zip(self.coordinates(value), self._sizes):
            i = i * n + c
        return i

    @staticmethod
    def new_row_major(ranks) -> "NDSlice":
        """The one-dimensional slice of ``ranks``, which must be contiguous."""
        ranks = [int(r) for r in ranks]
        if not ranks or ranks != list(range(ranks[0], ranks[0] + len(ranks))):
            raise ValueError(f"ranks {ranks} are not contiguous")
        return NDSlice(offset=ranks[0], sizes=[len(ranks)], strides=[1])

    @staticmethod
    def from_list(ranks) -> "list[NDSlice]":
        """One-dimensional slices covering ``ranks`` (each run of consecutive ranks,
        in order)."""
        out, run = [], []
        for r in (int(x) for x in ranks):
            if run and r != run[-1] + 1:
                out.append(NDSlice.new_row_major(run))
                run = []
            run.append(r)
        if run:
            out.append(NDSlice.new_row_major(run))
        return out

    def __eq__(self, other):
        return isinstance(other, NDSlice) and (self._offset, self._sizes, self._strides) \
            == (other._offset, other._sizes, other._strides)

    def __hash__(self):
        return hash((self._offset, tuple(self._sizes), tuple(self._strides)))

    def __reduce__(self):
        return (_ndslice, (self._offset, self._sizes, self._strides))

    def __repr__(self):
        return (f"NDSlice(offset={self._offset}, sizes={self._sizes}, "
                f"strides={self._strides})")


def _ndslice(offset, sizes, strides) -> NDSlice:
    return NDSlice(offset=offset, sizes=sizes, strides=strides)


class Shape:
    """Labels + strided view (offset, sizes, strides) onto global ranks. Immutable.

    ``Shape(labels, offset, sizes, strides)``, or Monarch's ``Shape(labels,
    ndslice)``.  Monarch's methods: ``ndslice``, ``ranks()``, ``coordinates(rank)``,
    ``at(label, i)``, ``select(label, slice)``, ``index(**{label: i})``,
    ``Shape.unity()``.
    """

    __slots__ = ("labels", "offset", "sizes", "strides")

    def __init__(self, labels, offset, sizes=None, strides=None) -> None:
        if isinstance(offset, NDSlice) and sizes is None and strides is None:
            offset, sizes, strides = offset.offset, offset.sizes, offset.strides
        elif sizes is None or strides is None:
            raise TypeError("Shape(labels, ndslice) or Shape(labels, offset, sizes, "
                            "strides)")
        self.labels = _check_labels(labels)
        self.offset = int(offset)
        self.sizes = tuple(int(s) for s in sizes)
        self.strides = tuple(int(s) for s in strides)
        if len(self.sizes) != len(self.labels) or len(self.strides) != len(self.labels):
            raise ValueError(f"labels {list(self.labels)}, sizes {list(self.sizes)} and "
                             f"strides {list(self.strides)} differ in length")

    @property
    def ndslice(self) -> NDSlice:
        return NDSlice(offset=self.offset, sizes=self.sizes, strides=self.strides)

    @staticmethod
    def unity() -> "Shape":
        """The shape of no dimensions: one rank, 0."""
        return Shape((), 0, (), ())

    def ranks(self) -> list:
        """Every global rank of the shape, in row-major order."""
        return self.global_ranks()

    def coordinates(self, rank: int) -> dict:
        """``{label: coordinate}`` of global rank ``rank`` (``ValueError`` if it is not
        in the shape)."""
        return dict(zip(self.labels, self.ndslice.coordinates(rank)))

    def at(self, label: str, index: int) -> "Shape":
        """The shape at ``index`` along ``label``, that dimension removed."""
        return self.slice(**{label: index})

    def select(self, label: str, slice: slice) -> "Shape":
        """The shape restricted along ``label`` by a slice; the dimension stays."""
        return self.slice(**{label: slice})

    def index(self, **kwargs) -> "Shape":
        """``shape.index(gpu=3, host=0)``: :meth:`at` for each, those dimensions removed."""
        return self.slice(**kwargs)

    @classmethod
    def dense(cls, labels, sizes) -> "Shape":
        strides = []
        acc = 1
        for s in reversed(tuple(sizes)):
            strides.append(acc)
            acc *= int(s)
        return cls(labels, 0, sizes, tuple(reversed(strides)))

    @property
    def extent(self) -> Extent:
        return Extent(self.labels, self.sizes)

    def __len__(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def global_ranks(self) -> list:
        """Global rank of every point, in local (row-major) rank order."""
        ranks = [self.offset]
        for size, stride in zip(self.sizes, self.strides):
            ranks = [r + i * stride for r in ranks for i in range(size)]
        return ranks

    def __eq__(self, other):
        return isinstance(other, Shape) and (self.labels, self.offset, self.sizes,
                                              self.strides) == (
            other.labels, other.offset, other.sizes, other.strides)

    def __reduce__(self):
        return (Shape, (self.labels, self.offset, self.sizes, self.strides))

    def __repr__(self):
        return f"Shape({dict(zip(self.labels, self.sizes))!r})"

    # -- algebra -----------------------------------------------------------
    def _index(self, dim: str) -> int:
        try:
            return self.labels.index(dim)
        except ValueError:
            raise MeshIndexError(
                f"unknown dimension {dim!r}; this mesh has dimensions {list(self.labels)!r}"
            ) from None

    def slice(self, **dims) -> "Shape":
        labels, sizes, strides = list(self.labels), list(self.sizes), list(self.strides)
        offset = self.offset
        drop = []
        for dim, sel in dims.items():
            i = self._index(dim)
            size, stride = self.sizes[i], self.strides[i]
            if isinstance(sel, bool) or not isinstance(sel, (int, slice)):
                if hasattr(sel, "__index__") and not isinstance(sel, bool):
                    sel = sel.__index__()
                else:
                    raise TypeError(f"slice for dimension {dim!r} must be an int or a slice, "
                                    f"not {sel!r}")
            if isinstance(sel, int):
                if not -size <= sel < size:
                    raise MeshIndexError(
                        f"index {dim}={sel} is out of range for size {size}")
                sel %= size
                offset += sel * stride
                drop.append(i)
            else:
                start, stop, step = sel.indices(size)
                if step <= 0:
                    raise ValueError(f"slice for dimension {dim!r} must have a positive "
                                     f"step, not {sel!r}")
                n = len(range(start, stop, step))
                if n == 0 or (sel.start is not None and not -size <= sel.start < size):
                    raise MeshIndexError(
                        f"slice {dim}={sel!r} is out of range (or empty) for size {size}")
                offset += start * stride
                sizes[i] = n
                strides[i] = stride * step
        keep = [i for i in range(len(labels)) if i not in drop]
        return Shape([labels[i] for i in keep], offset, [sizes[i] for i in keep],
                     [strides[i] for i in keep])

    def rename(self, **names) -> "Shape":
        for old in names:
            self._index(old)
        return Shape([names.get(l, l) for l in self.labels], self.offset, self.sizes,
                     self.strides)

    def flatten(self, name: str) -> "Shape":
        for i in range(len(self.sizes) - 1):
            if self.strides[i] != self.strides[i + 1] * self.sizes[i + 1]:
                raise ValueError(
                    f"cannot flatten {self!r} into {name!r}: the mesh is not dense "
                    "(slice it after flattening instead)")
        stride = self.strides[-1] if self.strides else 1
        return Shape([name], self.offset, [len(self)], [stride])

    def split(self, **kwargs) -> "Shape":
        splits = {k: v for k, v in kwargs.items() if k in self.labels}
        given = {k: v for k, v in kwargs.items() if k not in self.labels}
        labels, sizes, strides = [], [], []
        used = set()
        for lab, size, stride in zip(self.labels, self.sizes, self.strides):
            if lab not in splits:
                labels.append(lab); sizes.append(size); strides.append(stride)
                continue
            new = splits[lab]
            if isinstance(new, str) or not all(isinstance(n, str) for n in new):
                raise TypeError(f"split of {lab!r} must name a tuple of new dimensions, "
                                f"not {new!r}")
            known = 1
            unknown = [n for n in new if n not in given]
            for n in new:
                if n in given:
                    known *= int(given[n])
                    used.add(n)
            if len(unknown) > 1:
                raise ValueError(f"split of {lab!r} into {new!r} leaves sizes of "
                                 f"{unknown!r} undetermined; give all but one")
            if known == 0 or size % known:
                raise ValueError(f"cannot split dimension {lab!r} of size {size} into "
                                 f"{new!r} with sizes {given!r}")
            dims = [(n, int(given[n]) if n in given else size // known) for n in new]
            if unknown == [] and known != size:
                raise ValueError(f"split sizes {given!r} multiply to {known}, not {size}")
            acc = stride
            out = []
            for n, s in reversed(dims):
                out.append((n, s, acc))
                acc *= s
            for n, s, st in reversed(out):
                labels.append(n); sizes.append(s); strides.append(st)
        extra = set(given) - used
        if extra:
            raise ValueError(f"split got sizes for {sorted(extra)!r}, which no split names")
        return Shape(labels, self.offset, sizes, strides)


class MeshTrait:
    """Mesh algebra shared by proc, actor and value meshes.

    Subclasses provide ``_shape`` (a :class:`Shape`) and ``_new_with_shape(shape)``.
    """

    __slots__ = ()

    def slice(self, **dims):
        """Sub-mesh: ``mesh.slice(gpus=0)`` drops the dim, ``gpus=slice(0, 2)`` keeps it."""
        return self._new_with_shape(self._shape.slice(**dims))

    def split(self, **kwargs):
        """``mesh.split(gpus=("dp", "tp"), tp=2)``: one dim into several, row-major."""
        return self._new_with_shape(self._shape.split(**kwargs))

    def flatten(self, name: str):
        """All dims into one named ``name`` (dense meshes only)."""
        return self._new_with_shape(self._shape.flatten(name))

    def rename(self, **names):
        """``mesh.rename(gpus="workers")``."""
        return self._new_with_shape(self._shape.rename(**names))

    @property
    def extent(self) -> Extent:
        return self._shape.extent

    @property
    def _labels(self) -> tuple:
        """The dimension names (Monarch's examples read ``mesh._labels``)."""
        return tuple(self._shape.labels)

    @property
    def _ndslice(self) -> "NDSlice":
        """The mesh's ranks as a slice (offset, sizes, strides; Monarch's
        ``mesh._ndslice``)."""
        return self._shape.ndslice

    @property
    def sizes(self) -> dict:
        return dict(zip(self._shape.labels, self._shape.sizes))

    def size(self, dim=None) -> int:
        """Number of elements in the mesh, or along ``dim`` (a name or a sequence)."""
        if dim is None:
            return len(self._shape)
        dims = (dim,) if isinstance(dim, str) else tuple(dim)
        n = 1
        for d in dims:
            n *= self._shape.sizes[self._shape._index(d)]
        return n

    def __len__(self) -> int:
        return len(self._shape)

    def _points(self) -> Iterator[Point]:
        ext = self._shape.extent
        return (Point(i, ext) for i in range(len(self._shape)))
