"""Monarch's ``MeshTrait`` (``monarch._src.actor.shape``) under compat: a mesh of the
user's own gets the mesh algebra from ``_ndslice``, ``_labels`` and
``_new_with_shape``; and ``ValueMesh[T]`` is ``ValueMesh`` at run time."""

from __future__ import annotations

import pytest

from monarch_cy._actor.base.value_mesh import ValueMesh
from monarch_cy._actor.base.shape import Extent
from monarch_cy.compat._shape import MeshTrait, Shape, Slice


class Grid(MeshTrait):
    def __init__(self, shape):
        self._shape = shape

    def _new_with_shape(self, shape):
        assert isinstance(shape, Shape)         # Monarch's Shape, never ours
        return Grid(shape)

    @property
    def _ndslice(self):
        return self._shape.ndslice

    @property
    def _labels(self):
        return self._shape.labels


def _grid():
    return Grid(Shape(["host", "gpu"], Slice(offset=0, sizes=[2, 4], strides=[4, 1])))


def _ranks(g):
    return g._shape.ranks()


def test_sizes_len_and_extent():
    g = _grid()
    assert len(g) == 8 and g.size() == 8 and g.size("gpu") == 4
    assert g.size(["host", "gpu"]) == 8 and g.sizes == {"host": 2, "gpu": 4}
    assert g.extent == Extent(["host", "gpu"], [2, 4])
    with pytest.raises(KeyError, match="does not have dimension 'tp'"):
        g.size("tp")


def test_slice_split_flatten_rename_select_the_right_ranks():
    g = _grid()
    assert _ranks(g.slice(host=1)) == [4, 5, 6, 7] and g.slice(host=1)._labels == ["gpu"]
    assert _ranks(g.slice(gpu=slice(1, 3))) == [1, 2, 5, 6]
    s = g.split(gpu=("dp", "tp"), tp=2)
    assert s.sizes == {"host": 2, "dp": 2, "tp": 2} and _ranks(s.slice(dp=1, tp=0)) == [2, 6]
    assert g.flatten("rank").sizes == {"rank": 8}
    assert g.rename(host="node").sizes == {"node": 2, "gpu": 4}


def test_an_abstract_member_left_out_cannot_be_made():
    class Half(MeshTrait):
        @property
        def _ndslice(self):
            return Slice(offset=0, sizes=[1], strides=[1])

    with pytest.raises(TypeError):
        Half()


def test_value_mesh_subscript_is_the_class():
    vm = ValueMesh(Extent(["x"], [2]), [1, 2])
    assert ValueMesh[int] is ValueMesh and isinstance(vm, ValueMesh[int])
