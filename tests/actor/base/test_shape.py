import pickle

import pytest

from monarch_cy._actor.base.shape import Extent, Point, Shape
from monarch_cy.actor import MeshIndexError, ValueMesh


def vm(**sizes):
    ext = Extent(list(sizes), list(sizes.values()))
    return ValueMesh(ext, list(range(ext.nelements)))


def test_extent_and_point():
    e = Extent(["hosts", "gpus"], [2, 4])
    assert e.nelements == 8 and e["gpus"] == 4 and list(e) == ["hosts", "gpus"]
    p = Point(6, e)
    assert dict(p) == {"hosts": 1, "gpus": 2} and p.rank == 6
    assert pickle.loads(pickle.dumps(p)) == p
    assert pickle.loads(pickle.dumps(e)) == e
    with pytest.raises(ValueError, match="repeat"):
        Extent(["a", "a"], [1, 2])
    with pytest.raises(MeshIndexError):
        Point(8, e)


def test_slice_int_and_slice():
    m = vm(hosts=2, gpus=4)
    assert m.slice(hosts=1).values() == [4, 5, 6, 7]
    assert m.slice(hosts=1).sizes == {"gpus": 4}
    assert m.slice(gpus=slice(1, 4, 2)).values() == [1, 3, 5, 7]
    assert m.slice(gpus=slice(1, 4, 2)).sizes == {"hosts": 2, "gpus": 2}
    assert m.slice(hosts=0, gpus=-1).values() == [3]
    assert m.slice(gpus=slice(1, 3)).slice(gpus=1).values() == [2, 6]
    assert len(m) == 8 and m.size("gpus") == 4 and m.size() == 8
    assert m.size(("hosts", "gpus")) == 8


def test_slice_errors():
    m = vm(hosts=2, gpus=4)
    with pytest.raises(MeshIndexError, match="unknown dimension 'nodes'"):
        m.slice(nodes=0)
    with pytest.raises(IndexError, match="out of range"):
        m.slice(gpus=4)
    with pytest.raises(ValueError, match="out of range"):
        m.slice(gpus=slice(5, 9))
    with pytest.raises(TypeError, match="int or a slice"):
        m.slice(gpus="0")


def test_split_flatten_rename():
    m = vm(hosts=2, gpus=4)
    s = m.split(gpus=("dp", "tp"), tp=2)
    assert s.sizes == {"hosts": 2, "dp": 2, "tp": 2}
    assert s.values() == list(range(8))
    assert s.slice(tp=1).values() == [1, 3, 5, 7]
    f = m.flatten("world")
    assert f.sizes == {"world": 8} and f.values() == list(range(8))
    assert m.rename(gpus="workers").sizes == {"hosts": 2, "workers": 4}
    with pytest.raises(ValueError, match="not dense"):
        m.slice(gpus=slice(0, 3)).flatten("x")
    # uniformly strided views do flatten
    assert m.slice(gpus=slice(0, 4, 2)).flatten("x").values() == [0, 2, 4, 6]
    with pytest.raises(ValueError):
        m.split(gpus=("dp", "tp"), tp=3)
    with pytest.raises(MeshIndexError):
        m.rename(nodes="x")
    # a strided slice still splits correctly
    assert m.slice(hosts=1).split(gpus=("a", "b"), b=2).slice(a=1).values() == [6, 7]


def test_shape_global_ranks():
    s = Shape.dense(["a", "b"], [2, 3])
    assert s.global_ranks() == list(range(6))
    assert s.slice(b=slice(0, 3, 2)).global_ranks() == [0, 2, 3, 5]
