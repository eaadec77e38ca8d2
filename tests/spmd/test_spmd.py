"""monarch_cy.spmd runs a torchrun script on a mesh: the same final loss as under
torchrun in the same run, failures reported, re-runs after a respawn."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import monarch_cy.actor as api  # noqa: E402
from monarch_cy.actor import ActorError, SupervisionError, this_host  # noqa: E402
from monarch_cy.spmd import (AddrType, SPMDActor, setup_torch_elastic_env,  # noqa: E402
                             setup_torch_elastic_env_async)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_train.py")


def _torchrun(nproc: int, out, *extra) -> dict:
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc_per_node={nproc}", SCRIPT, "--out", str(out), *extra],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    torn_down = "terminate called without an active exception" in run.stderr
    if run.returncode != 0 and torn_down and out.exists():
        # torch's own run (no monarch_cy in it) aborted in gloo's teardown after rank 0
        # had written its result: about one run in fifteen here, barrier or not.  The
        # training finished, so its loss is the reference; anything else still fails.
        print(f"\ntorchrun aborted at teardown (exit {run.returncode}); result kept")
    else:
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    return json.loads(out.read_text())


def _spmd(per_host: dict, out, *extra) -> dict:
    pm = this_host().spawn_procs(per_host=per_host, env={"OMP_NUM_THREADS": "1"})
    try:
        am = pm.spawn("_SPMDActor", SPMDActor)
        first = dict.fromkeys(pm._labels, 0)
        addr, port = am.slice(**first).get_host_port.call_one(None).get(30)
        assert all(am.main.call(addr, port, [SCRIPT, "--out", str(out), *extra])
                   .get(300).values())
    finally:
        pm.stop().get(10)
    return json.loads(out.read_text())


def test_a_ddp_script_gives_torchruns_loss(tmp_path):
    ref = _torchrun(2, tmp_path / "torchrun.json", "--steps", "15")
    got = _spmd({"gpus": 2}, tmp_path / "spmd.json", "--steps", "15")
    print(f"\nfinal loss: torchrun {ref['loss']:.8f}, monarch_cy.spmd {got['loss']:.8f}")
    assert got["world"] == ref["world"] == 2
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-6, abs=1e-9)
    assert got["loss"] < 1.0           # it trained


@pytest.mark.gpu
def test_a_ddp_script_gives_torchruns_loss_on_nccl(tmp_path):
    n = torch.cuda.device_count()
    if n < 1:
        pytest.skip("no CUDA device visible to torch")
    ref = _torchrun(n, tmp_path / "torchrun.json", "--backend", "nccl")
    got = _spmd({"gpus": n}, tmp_path / "spmd.json", "--backend", "nccl")
    print(f"\nNCCL x{n} final loss: torchrun {ref['loss']:.8f}, spmd {got['loss']:.8f}")
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-5)


def _respawn_all(pm, n: int, within: float = 60) -> None:
    """Respawn ranks as they fail until all ``n`` have been (peers of a failed rank
    fail once their rendezvous times out)."""
    import time
    done, end = set(), time.monotonic() + within
    while len(done) < n:
        assert time.monotonic() < end, f"only ranks {sorted(done)} failed"
        try:
            done.update(pm.respawn().get(60))
        except Exception:
            pass
        time.sleep(0.2)


def test_failures_are_reported_and_failed_ranks_rerun(tmp_path, monkeypatch):
    faults = []
    monkeypatch.setattr(api, "unhandled_fault_hook", faults.append)
    pm = this_host().spawn_procs(per_host={"gpus": 2}, env={"OMP_NUM_THREADS": "1"})
    try:
        am = pm.spawn("_SPMDActor", SPMDActor)
        args = [SCRIPT, "--out", str(tmp_path / "after.json"), "--steps", "3",
                "--timeout", "5"]
        for flag, status in (("--exit-rank", 3), ("--fail-rank", 1)):
            # rank 1's first try exits (or raises): its proc ends with that status
            addr, port = am.slice(gpus=0).get_host_port.call_one(None).get(30)
            with pytest.raises(SupervisionError, match=f"code {status}"):
                am.main.call(addr, port, [*args, flag, "1"]).get(60)
            # rank 0 gives up waiting for it (5 s) and ends too; respawn both
            _respawn_all(pm, 2)
            addr, port = am.slice(gpus=0).get_host_port.call_one(None).get(30)
            assert all(am.main.call(addr, port, [*args, flag, "1"]).get(120).values())
            assert json.loads((tmp_path / "after.json").read_text())["world"] == 2
            (tmp_path / "after.json").unlink()
            pm.stop().get(10)
            pm = this_host().spawn_procs(per_host={"gpus": 2}, env={"OMP_NUM_THREADS": "1"})
            am = pm.spawn("_SPMDActor", SPMDActor)
    finally:
        pm.stop().get(10)


class EnvReader(api.Actor):
    @api.endpoint
    def get(self, names):
        return [os.environ.get(n) for n in names]


def test_setup_torch_elastic_env_and_bad_input():
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        with pytest.raises(ValueError, match="both master_addr and master_port"):
            setup_torch_elastic_env(pm, master_addr="127.0.0.1")
        setup_torch_elastic_env(pm, "10.1.2.3", 29511)
        reader = pm.spawn("reader", EnvReader)
        names = ["MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "GROUP_WORLD_SIZE"]
        assert list(reader.get.call(names).get(30).values()) == [
            ["10.1.2.3", "29511", "0", "0", "1"], ["10.1.2.3", "29511", "1", "1", "1"]]
        import asyncio
        asyncio.run(setup_torch_elastic_env_async(pm))      # the first proc's host
        got = list(reader.get.call(names).get(30).values())
        assert got[0][0] == got[1][0] != "10.1.2.3" and got[0][1] == got[1][1] != "29511"
        am = pm.spawn("_SPMDActor", SPMDActor)
        with pytest.raises(ActorError, match="script_args must be a non-empty list"):
            am.slice(gpus=0).main.call_one("127.0.0.1", 1, []).get(30)
        with pytest.raises(ActorError, match="master_port must be an int"):
            am.slice(gpus=0).setup_env.call_one("127.0.0.1", 0).get(30)
        with pytest.raises(ActorError, match="does not exist on rank 0"):
            am.slice(gpus=0).main.call_one("127.0.0.1", 1, ["/no/such.py"]).get(30)
        host, port = am.slice(gpus=0).get_host_port.call_one(AddrType.IPv4).get(30)
        assert host.count(".") == 3 and port > 0
    finally:
        pm.stop().get(10)
