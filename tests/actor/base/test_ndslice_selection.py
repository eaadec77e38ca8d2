"""Monarch's ``Shape`` methods, ``NDSlice`` and ``Selection`` (``monarch`` top level
under compat)."""

from __future__ import annotations

import pickle

import pytest

from monarch_cy._actor.base.selection import Selection
from monarch_cy._actor.base.shape import NDSlice, Shape


def test_ndslice():
    s = NDSlice(offset=1, sizes=[2, 3], strides=[3, 1])
    assert list(s) == [1, 2, 3, 4, 5, 6] and len(s) == 6 and s.ndim == 2
    assert s[4] == 5 and s[-1] == 6 and s[1:3] == (2, 3) and s.get(0) == 1
    assert s.index(5) == 4 and s.coordinates(5) == [1, 1] and s.nditem([1, 2]) == 6
    with pytest.raises(ValueError):
        s.index(0)
    with pytest.raises(IndexError):
        s.nditem([2, 0])
    with pytest.raises(TypeError):
        NDSlice(1, [2], [1])                                # keyword-only, as Monarch
    t = NDSlice(offset=0, sizes=[2, 2], strides=[1, 4])     # column-major
    assert list(t) == [0, 4, 1, 5] and t.coordinates(4) == [0, 1] and t.index(1) == 2
    assert pickle.loads(pickle.dumps(s)) == s and hash(s) == hash(NDSlice(
        offset=1, sizes=[2, 3], strides=[3, 1]))
    assert NDSlice.new_row_major([3, 4, 5]) == NDSlice(offset=3, sizes=[3], strides=[1])
    assert [list(x) for x in NDSlice.from_list([0, 1, 2, 5, 6])] == [[0, 1, 2], [5, 6]]


def test_shape_monarch_methods():
    sl = NDSlice(offset=0, sizes=[2, 4], strides=[4, 1])
    sh = Shape(["hosts", "gpus"], sl)
    assert sh.ndslice == sl and sh == Shape(("hosts", "gpus"), 0, (2, 4), (4, 1))
    assert sh.ranks() == list(range(8)) and len(sh) == 8
    assert sh.coordinates(6) == {"hosts": 1, "gpus": 2}
    at = sh.at("hosts", 1)
    assert at.labels == ("gpus",) and at.ranks() == [4, 5, 6, 7]
    sel = sh.select("gpus", slice(1, 4, 2))
    assert sel.labels == ("hosts", "gpus") and sel.ranks() == [1, 3, 5, 7]
    assert sh.index(hosts=0, gpus=3).ranks() == [3]
    assert Shape.unity().ranks() == [0] and len(Shape.unity()) == 1
    with pytest.raises(ValueError):
        Shape(["a"], NDSlice(offset=0, sizes=[2, 2], strides=[2, 1]))


def test_selection():
    sh = Shape(["hosts", "gpus"], NDSlice(offset=0, sizes=[2, 4], strides=[4, 1]))
    assert Selection.all().eval(sh) == list(range(8))
    assert Selection.from_string("*").eval(sh) == list(range(8))
    assert Selection.from_string("1").eval(sh) == [4, 5, 6, 7]
    assert Selection.from_string("(*, 0:4:2)").eval(sh) == [0, 2, 4, 6]
    assert Selection.from_string("*, 1:").eval(sh) == [1, 2, 3, 5, 6, 7]
    assert Selection.from_string("0, 1 | 1, 3").eval(sh) == [1, 7]
    assert Selection.from_string("0 & (1 | 2)").eval(sh) == []
    assert Selection.from_string("0, (1 | 2)").eval(sh) == [1, 2]
    one = Selection.any().eval(sh)
    assert len(one) == 1 and one[0] in range(8)
    s = Selection.from_string(" ( * , 0:4 ) ")
    assert s == Selection.from_string("(*,0:4)") and repr(s) == "Selection('(*, 0:4)')"
    assert pickle.loads(pickle.dumps(s)) == s
    for bad in ("", "(", "*,", "1 2", "a", "0:1:0", "(0), 1"):
        with pytest.raises(ValueError):
            Selection.from_string(bad)
    with pytest.raises(ValueError, match="more dimensions"):
        Selection.from_string("0, 0, 0").eval(sh)
    with pytest.raises(TypeError):
        Selection()


def test_monarch_top_level_names():
    import monarch_cy.compat._monarch as top
    assert top.Shape is Shape and top.NDSlice is NDSlice and top.Selection is Selection
    assert {"Shape", "NDSlice", "Selection"} <= set(top.__all__)
