"""Real RDMA verbs, in the soft-RoCE qemu guest (one boot for all of these).

Two processes on two rxe devices whose traffic crosses veth links through a
router namespace: RDMA WRITE and READ of host memory with the data verified,
windowed and reused batches, and the error paths -- a bad rkey and a remote
range past the peer's region give ``VerbsError`` named
``IBV_WC_REM_ACCESS_ERR``; unregistered local memory is refused before posting
(``ValueError``) and, unchecked, by the device (``IBV_WC_LOC_PROT_ERR``); an
idle wait times out with ``VerbsTimeout``.  The checks themselves live in
``guest_checks.py``; each test here asserts one of their results.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CHECKS = ["devices", "write", "read", "batch_reuse", "bad_rkey", "remote_out_of_range",
          "local_unregistered", "timeout", "device_registration", "close", "owner_close", "owner_exit"]


@pytest.mark.parametrize("name", CHECKS)
def test_guest_check(rdma_guest, name):
    res = rdma_guest.results
    assert "harness" not in res, res["harness"]["detail"]
    assert name in res, f"check {name!r} did not run; job log tail:\n{rdma_guest.log[-3000:]}"
    assert res[name]["ok"], f"{name} failed in the guest:\n{res[name]['detail']}"


def test_two_devices_over_the_wire(rdma_guest):
    """The client and the owner used different rxe devices and the bytes crossed the veth link."""
    detail = rdma_guest.results["devices"]["detail"]
    assert "'rxe0', 'rxe1'" in detail, detail
    assert "<Context 'rxe1'" in detail, detail
    tx, rx = rdma_guest.veth_bytes
    # The 16 MiB READ leaves the owner's link as responses; the 1 MiB WRITE arrives on it.
    assert tx > 16 << 20, f"only {tx} bytes left the owner's veth link"
    assert rx > 1 << 20, f"only {rx} bytes arrived on the owner's veth link"


def test_error_names(rdma_guest):
    res = rdma_guest.results
    assert "IBV_WC_REM_ACCESS_ERR" in res["bad_rkey"]["detail"]
    assert "IBV_WC_REM_ACCESS_ERR" in res["remote_out_of_range"]["detail"]
    assert "refused before posting" in res["local_unregistered"]["detail"]
    assert "ETIMEDOUT" in res["timeout"]["detail"]
