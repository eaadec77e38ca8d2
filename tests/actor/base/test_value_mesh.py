import pickle

import pytest

from monarch_cy.actor import Extent, MeshIndexError, Point, ValueMesh


def test_items_values_item():
    v = ValueMesh(Extent(["x", "y"], [2, 2]), ["a", "b", "c", "d"])
    assert v.values() == ["a", "b", "c", "d"]
    pts = [(dict(p), val) for p, val in v]
    assert pts[2] == ({"x": 1, "y": 0}, "c")
    assert all(isinstance(p, Point) for p, _ in v.items())
    assert v.item(x=1, y=1) == "d"
    with pytest.raises(MeshIndexError, match="missing"):
        v.item(x=1)
    assert v.slice(y=1).values() == ["b", "d"]
    assert pickle.loads(pickle.dumps(v.slice(x=1))) == v.slice(x=1)


def test_length_mismatch():
    with pytest.raises(ValueError):
        ValueMesh(Extent(["x"], [3]), [1, 2])
