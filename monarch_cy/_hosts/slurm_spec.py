"""What a :class:`~.slurm.SlurmJob` asks SLURM for: its checked arguments, the
``#SBATCH`` lines and ``srun`` options they become, the agent command, and the
specification a cached job must match (:mod:`.slurm_cache`).

Every argument is checked here, once, at construction: a bad one raises
``TypeError``/``ValueError`` naming the parameter and the value, before anything is
submitted.  Text that becomes part of the batch script may not hold a newline.
"""

from __future__ import annotations

import json
import os
import shlex
import sys

from monarch_cy._checks import check_bool, check_int, check_timeout, is_int
from monarch_cy._hosts import protocol as P
from monarch_cy._hosts.job import check_meshes

__all__ = ["SlurmSpec"]


def _opt_str(name: str, v, *, spaces: bool = False):
    if v is None:
        return None
    if not isinstance(v, str) or not v or "\n" in v or (not spaces and any(
            c.isspace() for c in v)):
        raise ValueError(f"{name} must be a non-empty str without newlines"
                         f"{'' if spaces else ' or spaces'} (or None), got {v!r}")
    return v


def _opt_int(name: str, v, minimum: int = 1):
    return None if v is None else check_int(name, v, minimum=minimum)


class SlurmSpec:
    """The specification half of :class:`~.slurm.SlurmJob` (its arguments: see
    there).  The job's run-time fields default to class attributes there."""

    def __init__(self, meshes: dict, python_exe: str = sys.executable,
                 slurm_args=(), monarch_port: int = P.DEFAULT_PORT,
                 job_name: str = "monarch_cy", ntasks_per_node: int = 1,
                 time_limit: str | None = None, partition: str | None = None,
                 log_dir: str | None = None, exclusive: bool = False,
                 gpus_per_node: int | None = None, cpus_per_task: int | None = None,
                 mem: str | None = None, job_start_timeout: float | None = None,
                 account: str | None = None, qos: str | None = None,
                 out_of_cluster: bool = False, attach_to: str | None = None, *,
                 proc_ports: str = "26601-27600", controller_host: str | None = None,
                 use_allocation: bool | None = None,
                 secret_file: str | None = None) -> None:
        self.meshes = check_meshes(meshes)
        if isinstance(slurm_args, (str, bytes)) or not hasattr(slurm_args, "__iter__"):
            raise TypeError(f"slurm_args must be a list of sbatch options, not "
                            f"{slurm_args!r}")
        self.slurm_args = list(slurm_args)
        for i, a in enumerate(self.slurm_args):
            if not isinstance(a, str) or not a.startswith("-") or "\n" in a:
                raise ValueError(f"slurm_args[{i}] must be one sbatch option starting "
                                 f"with '-' (e.g. '--qos=high' or '-w n0'), got {a!r}")
        if not (is_int(monarch_port) and 0 <= monarch_port < 65536):
            raise ValueError(f"monarch_port must be 0..65535, not {monarch_port!r}")
        _opt_str("proc_ports", proc_ports)
        lo, _, hi = proc_ports.partition("-")
        if not (lo.isdigit() and hi.isdigit() and 0 < int(lo) <= int(hi) < 65536):
            raise ValueError(f"proc_ports {proc_ports!r} must look like 26601-27600")
        check_bool("exclusive", exclusive)
        check_bool("out_of_cluster", out_of_cluster)
        check_bool("use_allocation", use_allocation, allow_none=True)
        if out_of_cluster or attach_to is not None:
            raise ValueError(f"out_of_cluster={out_of_cluster!r}, attach_to={attach_to!r}: "
                             "monarch_cy's agents dial the controller, so there is no "
                             "gateway to attach through; leave both at their defaults")
        self.python_exe = _opt_str("python_exe", python_exe, spaces=True)
        self.port = monarch_port
        self.job_name = _opt_str("job_name", job_name)
        self.ntasks_per_node = check_int("ntasks_per_node", ntasks_per_node, minimum=1)
        self.time_limit = _opt_str("time_limit", time_limit)
        self.partition = _opt_str("partition", partition)
        self.log_dir = _opt_str("log_dir", log_dir, spaces=True) or os.getcwd()
        self.exclusive = exclusive
        self.gpus_per_node = _opt_int("gpus_per_node", gpus_per_node)
        self.cpus_per_task = _opt_int("cpus_per_task", cpus_per_task)
        self.mem = _opt_str("mem", mem)
        self.account = _opt_str("account", account)
        self.qos = _opt_str("qos", qos)
        self.job_start_timeout = None if job_start_timeout is None else \
            check_timeout("job_start_timeout", job_start_timeout)
        self.proc_ports = proc_ports
        self.controller_host = _opt_str("controller_host", controller_host)
        self.use_allocation = use_allocation
        self.secret_file = _opt_str("secret_file", secret_file, spaces=True)

    @property
    def nodes(self) -> int:
        return sum(self.meshes.values())

    @property
    def log_path(self) -> str | None:
        """The job's output file (agents' messages); None before submission."""
        return None if self.job_id is None or self._srun is not None else \
            os.path.join(self.log_dir, f"slurm-{self.job_id}-{self.job_name}.out")

    def _spec(self) -> dict:
        """The arguments that shape the allocation (a cached job must match them)."""
        d = {k: getattr(self, k) for k in (
            "python_exe", "slurm_args", "port", "job_name", "ntasks_per_node",
            "time_limit", "partition", "exclusive", "gpus_per_node", "cpus_per_task",
            "mem", "account", "qos", "proc_ports", "secret_file")}
        d["meshes"] = [[k, v] for k, v in self.meshes.items()]
        return json.loads(json.dumps(d))

    def directives(self) -> list:
        """``(parameter, value, option)`` for each ``#SBATCH`` line of the script."""
        out = [("meshes", self.nodes, f"--nodes={self.nodes}"),
               ("ntasks_per_node", self.ntasks_per_node,
                f"--ntasks-per-node={self.ntasks_per_node}"),
               ("job_name", self.job_name, f"--job-name={self.job_name}")]
        for name, flag in (("time_limit", "time"), ("partition", "partition"),
                           ("gpus_per_node", "gpus-per-node"),
                           ("cpus_per_task", "cpus-per-task"), ("mem", "mem"),
                           ("account", "account"), ("qos", "qos")):
            v = getattr(self, name)
            if v is not None:
                out.append((name, v, f"--{flag}={v}"))
        if self.exclusive:
            out.append(("exclusive", True, "--exclusive"))
        for i, a in enumerate(self.slurm_args):
            out.append((f"slurm_args[{i}]", a, a))
        return out

    def _agent_cmd(self, addr: str | None) -> list:
        base = [self.python_exe, "-m", "monarch_cy._hosts.agent"]
        if addr is None:            # cached: listen for this and later controllers
            return base + ["--listen", f"tcp://0.0.0.0:{self.port}",
                           "--ports", self.proc_ports]
        return base + ["--connect", addr, "--once", "--ports", self.proc_ports,
                       "--connect-timeout", str(int(self.job_start_timeout or 600) + 60)]

    def _step_opts(self) -> list:
        cpus = self.ntasks_per_node * (self.cpus_per_task or 1)
        return [f"--nodes={self.nodes}", f"--ntasks={self.nodes}", "--ntasks-per-node=1"] + \
            ([f"--cpus-per-task={cpus}"] if cpus > 1 else [])

    def _sbatch_script(self, cmd: list) -> str:
        lines = ["#!/bin/bash"] + [f"#SBATCH {opt}" for _, _, opt in self.directives()]
        lines.append(f"#SBATCH --output={self.log_dir}/slurm-%j-{self.job_name}.out")
        lines.append("srun " + shlex.join(self._step_opts() + cmd))
        return "\n".join(lines) + "\n"
