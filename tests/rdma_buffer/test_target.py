"""``rdma_ibverbs_target`` (``MONARCH_CY_RDMA_IBVERBS_TARGET``): its forms, the
device a ``nic:`` target opens, and ``RdmaInitError`` from the calls that set RDMA
up when it is malformed -- in this process and in procs that start with it."""

from __future__ import annotations

import pytest

from monarch_cy._rdma_buffer import _target
from monarch_cy.actor import Actor, endpoint, this_host
from monarch_cy.config import configured
from monarch_cy.rdma import RDMAAction, RDMABuffer, RdmaInitError

VAR = "MONARCH_CY_RDMA_IBVERBS_TARGET"


@pytest.mark.parametrize("spec,nic", [("", None), ("  ", None), ("nic:mlx5_0", "mlx5_0"),
                                      ("cpu:0", None), ("gpu:3", None),
                                      (" nic:rxe0 ", "rxe0")])
def test_good_targets(monkeypatch, spec, nic):
    monkeypatch.setenv(VAR, spec)
    _target.check()
    assert _target.nic() == nic


@pytest.mark.parametrize("spec,why", [
    ("mlx5_0", "must be `cpu:<numa>`, `gpu:<ordinal>` or `nic:<name>`"),
    ("nic:", "must name a device"), ("cpu:x", "must be an integer"),
    ("gpu:-1", "must be an integer"), ("disk:0", "unknown target kind 'disk'")])
def test_malformed_targets_fail_rdma_set_up(monkeypatch, spec, why):
    monkeypatch.setenv(VAR, spec)
    with pytest.raises(RdmaInitError) as ei:
        RDMABuffer(memoryview(bytearray(b"rdma")))
    msg = str(ei.value)
    assert "RDMA_IBVERBS_TARGET" in msg and repr(spec) in msg and why in msg
    with pytest.raises(RdmaInitError, match="RDMA_IBVERBS_TARGET"):
        RDMAAction().submit()
    assert isinstance(ei.value, RuntimeError)


class Prober(Actor):
    @endpoint
    def try_paths(self):
        out = []
        for fn in (lambda: RDMABuffer(memoryview(bytearray(b"rdma"))),
                   lambda: RDMAAction().submit()):
            try:
                fn()
                out.append(None)
            except RdmaInitError as e:
                out.append(str(e))
        return out


def test_a_proc_started_with_a_malformed_target_refuses_rdma():
    with configured(rdma_ibverbs_target="mlx5_0", rdma_allow_tcp_fallback=True):
        pm = this_host().spawn_procs(per_host={"procs": 1})
    try:
        got = pm.spawn("prober", Prober).try_paths.call_one().get(30)
        assert len(got) == 2 and all(g and "RDMA_IBVERBS_TARGET" in g for g in got), got
    finally:
        pm.stop().get(30)
