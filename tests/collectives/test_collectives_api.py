"""The API in one process: UniqueId, rendezvous, env helper, make_group, and bad
input on a one-rank gloo group (each error names the parameter and value)."""

from __future__ import annotations

import pickle

import pytest
import torch

import monarch_cy.collectives as C
from monarch_cy._errors import ResourceClosedError
from monarch_cy.collectives import (
    CollectiveError,
    CollectiveTimeout,
    GlooGroup,
    GroupAbortedError,
    TcpRendezvous,
    UniqueId,
    make_group,
    pick_free_port,
    setup_torch_env,
)


def test_public_names_complete():
    import monarch_cy._collectives as impl  # noqa: F401

    assert sorted(C.__all__) == sorted(n for n in dir(C) if not n.startswith("_"))
    for name in C.__all__:
        obj = getattr(C, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert obj.__module__ == "monarch_cy.errors", name    # errors' public home
        elif isinstance(obj, type) or callable(obj):
            assert obj.__module__.startswith("monarch_cy._collectives"), name


def test_unique_id_validation_and_pickling():
    raw = bytes(range(128))
    u = UniqueId(raw)
    assert u.raw == raw and bytes(u) == raw and len(u.hex()) == 256
    assert pickle.loads(pickle.dumps(u)) == u and hash(UniqueId(raw)) == hash(u)
    assert UniqueId.from_hex(u.hex()) == u and UniqueId(bytearray(raw)) == u
    with pytest.raises(ValueError, match="exactly 128 bytes, got 127"):
        UniqueId(raw[:-1])
    with pytest.raises(ValueError, match="exactly 128 bytes, got 129"):
        UniqueId(raw + b"x")
    with pytest.raises(TypeError, match="str"):
        UniqueId("x" * 128)
    with pytest.raises(ValueError, match="hex digits"):
        UniqueId.from_hex("zz")
    with pytest.raises(AttributeError):
        u._raw = b""


def test_rendezvous_and_port():
    port = pick_free_port("127.0.0.1")
    assert 0 < port < 65536
    r = TcpRendezvous("127.0.0.1", port)
    assert pickle.loads(pickle.dumps(r)) == r
    for host, p in [("", 1), ("h", 0), ("h", 70000), ("h", True), (None, 1)]:
        with pytest.raises(ValueError):
            TcpRendezvous(host, p)


def test_setup_torch_env_keeps_user_values():
    env = {"NCCL_NVLS_ENABLE": "1"}
    wrote = setup_torch_env(3, 8, 1, "10.0.0.1", 29500, local_world_size=4, environ=env)
    assert env == {"NCCL_NVLS_ENABLE": "1", "RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
                   "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert "NCCL_NVLS_ENABLE" not in wrote
    env2: dict = {}
    setup_torch_env(0, 1, 0, "h", 1, environ=env2)
    assert env2["NCCL_NVLS_ENABLE"] == "0"
    with pytest.raises(ValueError, match=r"rank must be a rank in \[0, 2\), got 2"):
        setup_torch_env(2, 2, 0, "h", 1, environ={})
    with pytest.raises(ValueError, match="world_size"):
        setup_torch_env(0, 0, 0, "h", 1, environ={})
    with pytest.raises(ValueError, match="local_rank must be < local_world_size"):
        setup_torch_env(0, 2, 2, "h", 1, local_world_size=2, environ={})


def test_setup_torch_env_lets_torch_init(tmp_path):
    import torch.distributed as dist

    env: dict = {}
    setup_torch_env(0, 1, 0, "127.0.0.1", pick_free_port(), environ=env)
    import os

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        dist.init_process_group("gloo")
        t = torch.ones(2)
        dist.all_reduce(t)
        assert t.tolist() == [1.0, 1.0] and dist.get_world_size() == 1
    finally:
        dist.destroy_process_group()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_make_group_bad_input():
    with pytest.raises(ValueError, match="backend must be one of"):
        make_group("mpi", 0, 1, ("h", 1))
    with pytest.raises(ValueError, match="empty slice"):
        make_group("gloo", 0, 0, ("h", 1))
    with pytest.raises(TypeError, match="must be a UniqueId"):
        make_group("nccl", 0, 1, ("h", 1))
    with pytest.raises(TypeError, match="TcpRendezvous"):
        make_group("gloo", 0, 1, UniqueId(bytes(128)))
    with pytest.raises(ValueError, match=r"rank must be a rank in \[0, 2\), got 5"):
        make_group("gloo", 5, 2, ("127.0.0.1", 1))


def test_unreachable_store_is_a_bounded_error():
    with pytest.raises(CollectiveError, match="could not reach the store"):
        GlooGroup(1, 2, "127.0.0.1", pick_free_port(), timeout=1)


@pytest.fixture
def g():
    grp = make_group("gloo", 0, 1, ("127.0.0.1", pick_free_port()), timeout=10)
    yield grp
    grp.close()


def test_one_rank_group_ops(g):
    t = torch.arange(4.0)
    g.all_reduce(t, "avg")
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    out = torch.empty(4)
    g.all_gather(out, torch.arange(4.0))
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0]
    o = torch.empty(3, dtype=torch.int64)
    g.reduce_scatter(o, torch.tensor([4, 5, 6]), op=C.ReduceOp.MAX)
    assert o.tolist() == [4, 5, 6]
    g.barrier()
    child = g.split(7)
    assert (child.rank, child.size) == (0, 1)
    child.close()


def test_bad_input_names_parameter_and_value(g):
    with pytest.raises(ValueError, match="tensor must be contiguous"):
        g.all_reduce(torch.ones(4, 4).t())
    with pytest.raises(ValueError, match="tensor is on meta"):
        g.all_reduce(torch.ones(2, device="meta"))
    with pytest.raises(ValueError, match="dtype torch.bool, which collectives do not support"):
        g.all_reduce(torch.ones(2, dtype=torch.bool))
    with pytest.raises(ValueError, match="gloo does not support"):
        g.all_reduce(torch.ones(2, dtype=torch.uint32))
    with pytest.raises(ValueError, match=r"op must be one of .* got 'mean'"):
        g.all_reduce(torch.ones(2), "mean")
    with pytest.raises(ValueError, match=r"root must be a rank in \[0, 1\), got 1"):
        g.broadcast(torch.ones(2), root=1)
    with pytest.raises(TypeError, match="root must be an int rank"):
        g.broadcast(torch.ones(2), root="0")
    with pytest.raises(ValueError, match="stream must be None for gloo"):
        g.all_reduce(torch.ones(2), stream=1)
    with pytest.raises(TypeError, match="torch.Tensor or monarch_cy.gpu"):
        g.all_reduce([1.0, 2.0])
    with pytest.raises(ValueError, match=r"output must hold group size \(1\) x input elements = 3, got 4"):
        g.all_gather(torch.empty(4), torch.empty(3))
    with pytest.raises(ValueError, match="output has dtype float64 but input has float32"):
        g.all_gather(torch.empty(3, dtype=torch.float64), torch.empty(3))
    with pytest.raises(ValueError, match=r"peer must be a rank in \[0, 1\)"):
        g.send(torch.ones(1), 3)
    with pytest.raises(ValueError, match="peer must be another rank"):
        g.send(torch.ones(1), 0)
    with pytest.raises(TypeError, match="color must be an int"):
        g.split("red")


def test_closed_and_aborted(g):
    g.close()
    g.close()
    with pytest.raises(ResourceClosedError, match="closed"):
        g.all_reduce(torch.ones(1))
    g.abort()  # after close: nothing to abort
    assert g.aborted is None
    h = make_group("gloo", 0, 1, ("127.0.0.1", pick_free_port()), timeout=10)
    h.abort()
    h.abort()
    assert h.aborted == "abort() was called"
    with pytest.raises(GroupAbortedError, match="aborted"):
        h.barrier()
    with pytest.raises(ResourceClosedError):  # GroupAbortedError is a ResourceClosedError
        h.all_reduce(torch.ones(1))


def test_errors_pickle():
    for e in [CollectiveError("all_reduce", "peer died"), CollectiveTimeout("barrier", "late", 2.5),
              GroupAbortedError("why")]:
        e2 = pickle.loads(pickle.dumps(e))
        assert type(e2) is type(e) and str(e2) == str(e) and e2.__dict__ == e.__dict__
    assert isinstance(CollectiveTimeout("x", "y"), TimeoutError)
