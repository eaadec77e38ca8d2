"""The ``gpus`` coordinate indexes the GPUs this process was given
(monarch_cy._actor.launch.visible_gpus), in unit form and through real procs."""

from __future__ import annotations

import pytest

from monarch_cy._actor.launch import visible_gpus as vg
from monarch_cy.actor import this_host


@pytest.mark.parametrize("environ,g,expected", [
    ({}, 3, "3"),
    ({"CUDA_VISIBLE_DEVICES": "4,5"}, 1, "5"),
    ({"CUDA_VISIBLE_DEVICES": "GPU-aa, GPU-bb"}, 0, "GPU-aa"),
    ({"HIP_VISIBLE_DEVICES": "2,3"}, 1, "3"),
    ({"ROCR_VISIBLE_DEVICES": "6,7"}, 1, "1"),          # HIP renumbers ROCR's subset
    ({"SLURM_JOB_GPUS": "2,6"}, 1, "6"),
    ({"SLURM_STEP_GPUS": "1", "SLURM_JOB_GPUS": "0,1"}, 0, "1"),
    ({"CUDA_VISIBLE_DEVICES": "7", "SLURM_JOB_GPUS": "0,1"}, 0, "7"),   # CUDA wins
    ({"SLURM_JOB_GPUS": ""}, 2, "2"),                  # empty SLURM list: not a source
])
def test_assignment(environ, g, expected):
    import json
    got = vg.assignment(environ, g)
    before = json.loads(got.pop("MONARCH_CY_GPU_UNPINNED"))
    assert got == {"CUDA_VISIBLE_DEVICES": expected, "HIP_VISIBLE_DEVICES": expected}
    assert before == {v: environ.get(v) for v in ("CUDA_VISIBLE_DEVICES",
                                                  "HIP_VISIBLE_DEVICES")}


def test_asking_for_more_than_given_names_the_variable():
    with pytest.raises(ValueError, match=r"asks for 3 GPUs.*given 2 by "
                                         r"CUDA_VISIBLE_DEVICES='4,5'"):
        vg.check_enough({"CUDA_VISIBLE_DEVICES": "4,5"}, 3)
    with pytest.raises(ValueError, match=r"given 0 by CUDA_VISIBLE_DEVICES=''"):
        vg.check_enough({"CUDA_VISIBLE_DEVICES": ""}, 1)
    vg.check_enough({"CUDA_VISIBLE_DEVICES": "4,5"}, 2)
    vg.check_enough({}, 64)


def test_procs_get_the_inherited_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    monkeypatch.delenv("MONARCH_CY_PIN_GPUS", raising=False)
    from _actors import Victim
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    m = pm.spawn("vis", Victim)
    try:
        got = [(m.slice(gpus=g).env.call_one("CUDA_VISIBLE_DEVICES").get(30),
                m.slice(gpus=g).env.call_one("HIP_VISIBLE_DEVICES").get(30))
               for g in (0, 1)]
        assert got == [("4", "4"), ("5", "5")]
    finally:
        pm.stop().get(10)
    with pytest.raises(ValueError, match="given 2 by CUDA_VISIBLE_DEVICES"):
        this_host().spawn_procs(per_host={"gpus": 3})
    monkeypatch.setenv("MONARCH_CY_PIN_GPUS", "0")       # not GPUs: no check
    this_host().spawn_procs(per_host={"gpus": 3}).stop().get(10)


@pytest.mark.gpu
def test_on_a_gpu_the_proc_sees_exactly_the_inherited_device(monkeypatch):
    """On a GPU machine: with CUDA_VISIBLE_DEVICES naming the last device, the
    proc at gpus=0 sees one device, the one the controller sees last."""
    from _actors import GpuProbe
    from monarch_cy.gpu import Device, device_count
    n = device_count()
    last_bus = Device(n - 1).properties.pci_bus_id
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", str(n - 1))
    monkeypatch.delenv("MONARCH_CY_PIN_GPUS", raising=False)
    pm = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        count, buses = pm.spawn("probe", GpuProbe).devices.call_one().get(60)
    finally:
        pm.stop().get(10)
    assert (count, buses) == (1, [last_bus])
    with pytest.raises(ValueError, match="given 1 by CUDA_VISIBLE_DEVICES"):
        this_host().spawn_procs(per_host={"gpus": 2})
