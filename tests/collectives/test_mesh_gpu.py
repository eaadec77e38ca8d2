"""An NCCL group made from the controller over a one-GPU proc mesh (nranks = 1)."""

from __future__ import annotations


import pytest

pytestmark = pytest.mark.gpu


pytest.importorskip("zmq")


def test_nccl_group_over_a_gpu_proc_mesh():
    from monarch_cy.actor import this_host
    from monarch_cy.collectives import create_group

    from _mesh_actors import Reducer  # noqa: E402

    procs = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        assert create_group(procs, "gpu_world", timeout=120) == 1   # backend chosen: nccl
        actors = procs.spawn("gpu_reducer", Reducer)
        rank, size, total, _ = actors.all_reduce_gpu.call_one("gpu_world", 3.0).get(timeout=120)
        assert (rank, size, total) == (0, 1, 3.0)
        assert actors.backend_of.call_one("gpu_world").get(timeout=60) == "NcclCommunicator"
    finally:
        procs.stop().get(timeout=60)
