"""What procs are started with (monarch_cy._actor.launch.proc_start): Monarch's
``bootstrap_command`` (per point, custom programs), ``proc_bind``, and the torchrun
environment every proc gets before user code runs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from monarch_cy._actor.launch import proc_bind
from monarch_cy._actor.launch.bootstrap_command import BootstrapCommand
from monarch_cy.actor import (Actor, RestartPolicy, default_bootstrap_cmd, endpoint,
                              this_host)
from _paths import ACTOR_TESTS, ROOT  # noqa: F401


class Env(Actor):
    @endpoint
    def get(self, names):
        return {n: os.environ.get(n) for n in names}

    @endpoint
    def argv0(self):
        with open(f"/proc/{os.getpid()}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode()

    @endpoint
    def affinity(self):
        return sorted(os.sched_getaffinity(0))

    @endpoint
    def exit(self, code):
        os._exit(code)


TORCHRUN = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
            "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR",
            "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE"]


def test_command_values_and_checks():
    cmd = default_bootstrap_cmd()
    assert cmd.program == sys.executable and cmd.is_default_program()
    assert cmd.args == ["-m", "monarch_cy._actor.bootstrap"] and cmd.env == {}
    env = cmd.with_env({"A": "1"}).with_env({"A": "2", "B": "3"})
    assert env.env == {"A": "2", "B": "3"} and cmd.env == {}      # copies, merged
    assert env.is_default_program() and env != cmd and env == cmd.with_env({"A": "2", "B": "3"})
    monarchs = BootstrapCommand(sys.executable, None, ["-m", "monarch._src.actor.bootstrap_main"], {})
    assert monarchs.is_default_program()          # Monarch's docs' module means ours
    assert BootstrapCommand("/bin/sh", "x", ["-c", "y"]).argv() == ["x", "-c", "y"]
    with pytest.raises(ValueError, match="program"):
        BootstrapCommand("")
    with pytest.raises(TypeError, match="args"):
        BootstrapCommand("python", None, "-m x")
    with pytest.raises(TypeError, match="env must map str to str"):
        cmd.with_env({"A": 1})
    with pytest.raises(ValueError, match="invalid variable name"):
        cmd.with_env({"A=B": "1"})


def test_every_proc_gets_the_torchrun_environment():
    pm = this_host().spawn_procs(per_host={"hosts": 2, "gpus": 2})
    try:
        got = pm.spawn("env", Env).get.call(TORCHRUN).get(30)
        envs = list(got.values())                       # in rank order
        ports = {e["MASTER_PORT"] for e in envs}
        run_ids = {e["TORCHELASTIC_RUN_ID"] for e in envs}
        assert len(ports) == 1 and len(run_ids) == 1
        for r, e in enumerate(envs):
            # one machine: torchrun's node is the host, so all 4 are local
            assert (e["RANK"], e["WORLD_SIZE"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"],
                    e["GROUP_RANK"], e["GROUP_WORLD_SIZE"], e["ROLE_RANK"],
                    e["ROLE_WORLD_SIZE"]) == (str(r), "4", str(r), "4", "0", "1", str(r), "4")
            assert e["MASTER_ADDR"] == "127.0.0.1" and 0 < int(e["MASTER_PORT"]) < 65536
            assert e["TORCHELASTIC_RESTART_COUNT"] == "0"
            assert e["TORCHELASTIC_USE_AGENT_STORE"] == "False"
            assert e["ROLE_NAME"] == "default"
    finally:
        pm.stop().get(10)


def test_restart_count_grows_with_each_respawn(monkeypatch):
    import monarch_cy.actor as api
    faults = []
    monkeypatch.setattr(api, "unhandled_fault_hook", faults.append)
    pm = this_host().spawn_procs(per_host={"gpus": 2}, restart=RestartPolicy(max_restarts=5))
    try:
        m = pm.spawn("env", Env)
        names = ["TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "RANK"]
        assert [e["TORCHELASTIC_MAX_RESTARTS"] for e in m.get.call(names).get(30).values()] \
            == ["5", "5"]
        for expected in ("1", "2"):
            try:
                m.slice(gpus=1).exit.call_one(3).get(10)
            except Exception:
                pass
            pm.respawn([1]).get(60)
            got = list(m.get.call(names).get(30).values())
            assert [g["TORCHELASTIC_RESTART_COUNT"] for g in got] == ["0", expected]
            assert [g["RANK"] for g in got] == ["0", "1"]
    finally:
        pm.stop().get(10)


def test_bootstrap_command_per_point_env_wins_over_the_defaults():
    def cmd(point):
        return default_bootstrap_cmd().with_env({
            "MY_COORD": f"{point['gpus']}", "CUDA_VISIBLE_DEVICES": f"9{point['gpus']}",
            "MONARCH_CY_RANK": "77"})            # the runtime's own cannot be overridden
    pm = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap_command=cmd,
                                 env={"MY_COORD": "base", "SPAWN_ENV": "x"})
    try:
        got = list(pm.spawn("env", Env).get.call(
            ["MY_COORD", "CUDA_VISIBLE_DEVICES", "MONARCH_CY_RANK", "SPAWN_ENV"]).get(30).values())
        assert got == [{"MY_COORD": "0", "CUDA_VISIBLE_DEVICES": "90", "MONARCH_CY_RANK": "0",
                        "SPAWN_ENV": "x"},
                       {"MY_COORD": "1", "CUDA_VISIBLE_DEVICES": "91", "MONARCH_CY_RANK": "1",
                        "SPAWN_ENV": "x"}]
    finally:
        pm.stop().get(10)


def test_a_custom_program_is_executed_with_its_arg0(tmp_path):
    marker = tmp_path / "ran"
    wrapper = tmp_path / "wrap.sh"
    wrapper.write_text(f"#!/bin/sh\necho \"$0 $@\" >> {marker}\n"
                       f"export WRAPPED=yes\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    cmd = BootstrapCommand(str(wrapper), "my-wrapper", ["-m", "monarch_cy._actor.bootstrap"],
                           {"FROM_CMD": "1"})
    pm = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap_command=cmd)
    try:
        got = list(pm.spawn("env", Env).get.call(["WRAPPED", "FROM_CMD"]).get(30).values())
        assert got == [{"WRAPPED": "yes", "FROM_CMD": "1"}] * 2
        lines = marker.read_text().splitlines()       # a #! script's $0 is its path
        assert lines == [f"{wrapper} -m monarch_cy._actor.bootstrap"] * 2
    finally:
        pm.stop().get(10)
    # arg0 is what a binary sees as argv[0]
    cmd = BootstrapCommand(sys.executable, "my-python", ["-m", "monarch_cy._actor.bootstrap"])
    assert not cmd.is_default_program()
    pm = this_host().spawn_procs(per_host={"gpus": 1}, bootstrap_command=cmd)
    try:
        assert pm.spawn("env", Env).argv0.call_one().get(30) == "my-python"
    finally:
        pm.stop().get(10)


def test_bad_bootstrap_commands_start_nothing(tmp_path):
    from monarch_cy._actor.base import state
    before = set(state.LIVE_PROCS)
    with pytest.raises(FileNotFoundError, match="no-such-program"):
        this_host().spawn_procs(per_host={"gpus": 2},
                                bootstrap_command=BootstrapCommand("no-such-program"))
    with pytest.raises(TypeError, match=r"returned 'x' for point"):
        this_host().spawn_procs(per_host={"gpus": 2}, bootstrap_command=lambda p: "x")
    with pytest.raises(ValueError, match=r"raised for point .*ZeroDivisionError"):
        this_host().spawn_procs(per_host={"gpus": 2}, bootstrap_command=lambda p: 1 / 0)
    with pytest.raises(TypeError, match="bootstrap_command must be"):
        this_host().spawn_procs(per_host={"gpus": 2}, bootstrap_command="python")
    assert set(state.LIVE_PROCS) == before


def test_proc_bind_checks():
    assert proc_bind.parse_list("0-2,5,5", "x") == [0, 1, 2, 5]
    for bad in ("", "a", "3-1", "1-", "-1"):
        with pytest.raises(ValueError, match="x"):
            proc_bind.parse_list(bad, "x")
    with pytest.raises(ValueError, match=r"proc_bind length \(1\) must equal procs_per_host \(2\)"):
        this_host().spawn_procs(per_host={"gpus": 2}, proc_bind=[{"cpus": "0"}])
    with pytest.raises(ValueError, match=r"proc_bind\[1\] has unknown keys \['cpu'\]"):
        this_host().spawn_procs(per_host={"gpus": 2}, proc_bind=[{}, {"cpu": "0"}])
    with pytest.raises(ValueError, match=r"proc_bind\[0\]\['cpus'\]"):
        this_host().spawn_procs(per_host={"gpus": 2}, proc_bind=[{"cpus": "x"}, {}])
    with pytest.raises(TypeError, match="proc_bind must be a list of dicts"):
        this_host().spawn_procs(per_host={"gpus": 2}, proc_bind={"cpus": "0"})


def test_proc_bind_lists_are_bounded_before_they_are_expanded():
    """A range past Linux's CPU (or NUMA node) ceiling is refused naming proc_bind and
    the list, not expanded until memory runs out; overlapping ranges expand once."""
    for key, text, limit in (("physcpubind", "8192", 8192),
                             ("membind", "0-1024", 1024),
                             ("cpunodebind", "1,99999999999999999999", 1024)):
        with pytest.raises(ValueError, match=rf"proc_bind\[1\]\['{key}'\] names \d+ in "
                                             rf"'{text}': numbers must be below {limit}"):
            proc_bind.check([{}, {key: text}], 2)
    assert proc_bind.check([{"cpus": "8191", "membind": "1023"}], 1) == [
        {"cpus": "8191", "membind": "1023"}]
    assert proc_bind.parse_list(",".join(["0-8191"] * 1000), "x") == list(range(8192))
    # the whole 32-bit range, in a process of 1 GiB of address space (an unbounded
    # expansion fails there with MemoryError instead of taking this machine's memory)
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from monarch_cy._actor.launch import proc_bind\n"
            "try:\n    proc_bind.check([{'cpus': '0-4294967295'}], 1)\n"
            "except ValueError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == ("proc_bind[0]['cpus'] names 4294967295 in "
                                  "'0-4294967295': numbers must be below 8192 (the most "
                                  "CPUs Linux supports)"), out.stderr[-2000:]


def test_proc_bind_pins_each_proc():
    cpus = sorted(os.sched_getaffinity(0))
    first, last = cpus[0], cpus[-1]
    numa = os.path.exists("/sys/devices/system/node/node0")
    binds = [{"cpus": str(first)}, {"physcpubind": str(last)} if numa else {"cpus": str(last)}]
    pm = this_host().spawn_procs(per_host={"gpus": 2}, proc_bind=binds)
    try:
        assert list(pm.spawn("env", Env).affinity.call().get(30).values()) == [[first], [last]]
    finally:
        pm.stop().get(10)


class Torch(Actor):
    @endpoint
    def devices(self):
        import torch
        return torch.cuda.device_count(), os.environ.get("CUDA_VISIBLE_DEVICES")


@pytest.mark.gpu
def test_bootstrap_command_device_list_on_a_gpu():
    """On a real GPU: the pinned default shows one device; a command's own
    CUDA_VISIBLE_DEVICES wins (empty: none)."""
    def cmd(point):
        return default_bootstrap_cmd().with_env(
            {"CUDA_VISIBLE_DEVICES": "" if point["gpus"] == 1 else "0"})
    pm = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap_command=cmd,
                                 env={"CUDA_VISIBLE_DEVICES": "0,0"})
    try:
        assert list(pm.spawn("t", Torch).devices.call().get(120).values()) == [(1, "0"), (0, "")]
    finally:
        pm.stop().get(10)


_DECOY_SCRIPT = r"""
import os, sys
from monarch_cy.actor import Actor, endpoint, this_host

class Where(Actor):
    @endpoint
    def where(self):
        import monarch_cy
        return monarch_cy.__file__

if __name__ == "__main__":
    pm = this_host().spawn_procs(per_host={"gpus": 2})
    files = set(pm.spawn("w", Where).where.call().get(60).values())
    import monarch_cy
    print("SAME" if files == {monarch_cy.__file__} else f"OTHER {files}")
    pm.stop().get(30)
"""


@pytest.mark.parametrize("start", ["fork", "exec"])
def test_procs_import_the_controllers_monarch_cy_not_one_in_the_working_directory(
        tmp_path, start):
    # A source checkout (or any folder named monarch_cy) in the directory the
    # controller runs from must not be what its procs import.
    import subprocess
    decoy = tmp_path / "monarch_cy"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy was imported')\n")
    script = tmp_path / "scripts" / "ctl.py"
    script.parent.mkdir()
    script.write_text(_DECOY_SCRIPT)
    env = dict(os.environ, MONARCH_CY_START=start)
    root = ROOT
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "SAME", out.stdout + out.stderr
