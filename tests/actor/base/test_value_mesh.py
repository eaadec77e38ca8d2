import pickle

import pytest

from monarch_cy.actor import Extent, Point, ValueMesh


def test_items_values_item():
    v = ValueMesh(Extent(["x", "y"], [2, 2]), ["a", "b", "c", "d"])
    assert v.values() == ["a", "b", "c", "d"]
    pts = [(dict(p), val) for p, val in v]
    assert pts[2] == ({"x": 1, "y": 0}, "c")
    assert all(isinstance(p, Point) for p, _ in v.items())
    assert v.item(x=1, y=1) == "d"
    assert v.slice(x=1).item(y=0) == "c"
    assert v.slice(y=1).values() == ["b", "d"]
    assert pickle.loads(pickle.dumps(v.slice(x=1))) == v.slice(x=1)


def test_length_mismatch():
    with pytest.raises(ValueError):
        ValueMesh(Extent(["x"], [3]), [1, 2])


def test_errors_and_text_are_monarchs():
    """Monarch's exception types and texts (checked against torchmonarch 0.7.0 by the
    differential scenario mesh_text)."""
    v = ValueMesh(Extent(["x", "y"], [2, 2]), ["a", "b", "c", "d"])
    with pytest.raises(ValueError, match=r"^index 9 out of range \(len=4\)$"):
        v.get(9)
    with pytest.raises(KeyError) as ei:
        v.item(x=1)
    assert ei.value.args == ("y",)
    with pytest.raises(KeyError) as ei:
        v.item(x=1, y=0, z=2)
    assert ei.value.args == ("item has extra dimensions: ['z']",)
    with pytest.raises(IndexError, match=r"^rank 10 not in current shape$"):
        v.item(x=5, y=0)
    with pytest.raises(IndexError):      # in range of the flat list, not of the mesh
        v.item(x=0, y=2)
    with pytest.raises(TypeError, match="y='1'"):
        v.item(x=0, y="1")
    s = v.slice(x=1)
    assert repr(s) == ("ValueMesh({y: 2}):\n"
                       "  (({'y': 0/2}, 'c'), ({'y': 1/2}, 'd'))")
    wide = ValueMesh(Extent(["x"], [2]), ["v" * 40, "w" * 40])
    assert repr(wide).splitlines()[1:] == [f"  (({{'x': 0/2}}, '{'v' * 40}'),",
                                           f"   ({{'x': 1/2}}, '{'w' * 40}'))"]
