"""Groups over proc meshes, made from the controller, used by actors (gloo on CPU)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from monarch_cy.actor import this_host  # noqa: E402
from monarch_cy.collectives import create_group, create_groups, setup_torch_distributed  # noqa: E402

from _mesh_actors import Reducer  # noqa: E402


@pytest.fixture(scope="module")
def mesh():
    procs = this_host().spawn_procs(per_host={"rows": 2, "cols": 2})
    yield procs
    procs.stop().get(timeout=30)


def test_group_over_whole_mesh_all_reduces(mesh):
    assert create_group(mesh, "world", backend="gloo", timeout=60) == 4
    actors = mesh.spawn("reducer_world", Reducer)
    out = actors.all_reduce.call("world", 1.5).get(timeout=60)
    vals = list(out.values())
    assert sorted(v[0] for v in vals) == [0, 1, 2, 3]
    assert all(v[1] == 4 and v[2] == 6.0 for v in vals)


def test_groups_along_a_dimension(mesh):
    sizes = create_groups(mesh, "by_row", along="cols", backend="gloo", timeout=60)
    assert sorted(sizes.values()) == [2, 2] and len(sizes) == 2
    actors = mesh.spawn("reducer_rows", Reducer)
    res = actors.all_reduce.call("by_row", 1.0).get(timeout=60)
    for _, (rank, size, total, point) in res.items():
        assert size == 2 and total == 2.0 and rank == point["cols"]
    sums = actors.all_reduce_point.call("by_row").get(timeout=60)
    for p, total in sums.items():
        assert total == 20.0 * p["rows"] + 1.0            # row r: (10r + 0) + (10r + 1)
    create_groups(mesh, "by_col", along="rows", backend="gloo", timeout=60)
    sums = actors.all_reduce_point.call("by_col").get(timeout=60)
    for p, total in sums.items():
        assert total == 10.0 + 2.0 * p["cols"]             # col c: (0 + c) + (10 + c)


def test_group_over_a_slice(mesh):
    row0 = mesh.slice(rows=0)
    assert create_group(row0, "row0", backend="gloo", timeout=60) == 2
    actors = row0.spawn("reducer_slice", Reducer)
    res = actors.all_reduce.call("row0", 2.0).get(timeout=60)
    assert [v[2] for v in res.values()] == [4.0, 4.0]


def test_unknown_group_and_bad_arguments(mesh):
    actors = mesh.spawn("reducer_bad", Reducer)
    with pytest.raises(Exception, match="no group named 'nope'"):
        actors.slice(rows=0, cols=0).all_reduce.call_one("nope", 1.0).get(timeout=30)
    with pytest.raises(ValueError, match="not a dimension"):
        create_groups(mesh, "x", along="depth", backend="gloo")
    with pytest.raises(ValueError, match="backend"):
        create_group(mesh, "y", backend="mpi")
    with pytest.raises(ValueError, match="name"):
        create_group(mesh, "", backend="gloo")


def test_torch_distributed_environment_pattern(mesh):
    info = setup_torch_distributed(mesh)
    assert info["master_addr"] == "127.0.0.1" and info["master_port"] > 0
    actors = mesh.spawn("torch_dist", Reducer)
    res = actors.torch_dist_sum.call(1.0).get(timeout=120)
    vals = sorted(res.values())
    assert [v[0] for v in vals] == [0, 1, 2, 3] and all(v[1] == 4 and v[2] == 4.0 for v in vals)
