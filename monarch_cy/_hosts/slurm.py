"""``SlurmJob``: hosts from SLURM, one agent per allocated node.

``apply()`` submits a batch job (``sbatch``) whose script runs
``srun python -m monarch_cy._hosts.agent --connect tcp://<controller>:<port> --once``
on every node; inside an existing allocation (``$SLURM_JOB_ID`` set, or
``use_allocation=True``) it starts that ``srun`` as a job step instead.  The agents
dial this controller (its agent port: ``monarch_port``, default 26600; 0 picks a
free one), so nodes need no open port of their own for the agent.  ``state()``
waits for every agent (failing with the scheduler's reason if the job ends or is
refused first) and returns the host meshes, hosts ordered by ``SLURM_NODEID``.

The job secret never appears in the script or on a command line: it is passed in
the environment of ``sbatch``/``srun`` (SLURM propagates the submitter's environment
to the tasks, and keeps it in its private state), or, with ``secret_file=``, in a
0600 file on a shared filesystem whose path is passed instead.

Ending: ``kill()`` (and the controller's normal exit) says goodbye to the agents and
cancels the job (``scancel``).  If the controller dies, its agents see no
heartbeat, kill their procs and exit, which ends the job step; and a small watchdog
process (started by ``apply()``) runs ``scancel`` as soon as the controller's pipe
to it closes.  A rejected submission raises :class:`SchedulerError` carrying
SLURM's message.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time

from monarch_cy import _config
from monarch_cy._checks import is_int
from monarch_cy._hosts import protocol as P
from monarch_cy._hosts.errors import SchedulerError
from monarch_cy._hosts.job import JobState, JobTrait, check_meshes, split_meshes

__all__ = ["SlurmJob"]

_TERMINAL = ("FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "COMPLETED", "NODE_FAIL",
             "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE")

# pending reasons that never clear by waiting
_HOPELESS = ("PartitionNodeLimit", "PartitionConfig", "BadConstraints", "PartitionDown",
             "PartitionInactive", "InvalidAccount", "InvalidQOS", "QOSMaxNodePerJobLimit")

_WATCHDOG = r"""
import os, signal, subprocess, sys
job, srun_pid = sys.argv[1], int(sys.argv[2])
sys.stdin.buffer.read()          # returns when the controller closes or dies
if job != "-":
    subprocess.run(["scancel", job], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if srun_pid > 0:
    for sig in (signal.SIGTERM, signal.SIGTERM):   # srun: the second TERM ends the step
        try:
            os.kill(srun_pid, sig)
        except ProcessLookupError:
            break
"""


def _run(argv, **kw):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kw)
    except FileNotFoundError:
        raise SchedulerError(f"{argv[0]} not found: is this a SLURM cluster (PATH)?") \
            from None


class SlurmJob(JobTrait):
    """Hosts from SLURM (module docstring).  ``meshes``: name -> number of nodes."""

    def __init__(self, meshes: dict, *, python_exe: str = sys.executable,
                 slurm_args=(), monarch_port: int = P.DEFAULT_PORT,
                 job_name: str = "monarch_cy", time_limit: str | None = None,
                 partition: str | None = None, log_dir: str | None = None,
                 exclusive: bool = False, gpus_per_node: int | None = None,
                 cpus_per_task: int | None = None, mem: str | None = None,
                 job_start_timeout: float | None = None, proc_ports: str = "26601-27600",
                 controller_host: str | None = None, use_allocation: bool | None = None,
                 secret_file: str | None = None) -> None:
        self.meshes = check_meshes(meshes)
        if isinstance(slurm_args, str):
            raise TypeError("slurm_args must be a list of arguments, not a str")
        if not (is_int(monarch_port) and 0 <= monarch_port < 65536):
            raise ValueError(f"monarch_port must be 0..65535, not {monarch_port!r}")
        if not re.fullmatch(r"\d+-\d+", proc_ports):
            raise ValueError(f"proc_ports {proc_ports!r} must look like 26601-27600")
        self.python_exe, self.slurm_args = python_exe, list(slurm_args)
        self.port, self.job_name = monarch_port, job_name
        self.time_limit, self.partition = time_limit, partition
        self.log_dir = log_dir or os.getcwd()
        self.exclusive, self.gpus_per_node = exclusive, gpus_per_node
        self.cpus_per_task, self.mem = cpus_per_task, mem
        self.job_start_timeout = job_start_timeout
        self.proc_ports = proc_ports
        self.controller_host = controller_host
        self.use_allocation = use_allocation
        self.secret_file = secret_file
        self.job_id = None
        self._srun = None
        self._watchdog = None
        self._dialin = None
        self._state = None
        self._last_poll = 0.0
        self._errfile = None

    @property
    def nodes(self) -> int:
        return sum(self.meshes.values())

    # -- submission ----------------------------------------------------------
    def _controller_ip(self) -> str:
        ip = self.controller_host or _config.host()
        if ip:
            return ip
        out = _run(["scontrol", "show", "config"]).stdout
        m = re.search(r"^SlurmctldHost\[0\]\s*=\s*(\S+?)(?:\((\S+)\))?\s*$", out, re.M)
        if not m:
            raise SchedulerError("cannot find SlurmctldHost in `scontrol show config`; "
                                 "pass controller_host=")
        return P.local_ip_towards(m.group(2) or m.group(1))

    def _agent_cmd(self, addr: str) -> list:
        return [self.python_exe, "-m", "monarch_cy._hosts.agent", "--connect", addr,
                "--once", "--ports", self.proc_ports,
                "--connect-timeout", str(int(self.job_start_timeout or 600) + 60)]

    def apply(self) -> None:
        """Submit the job (or start the step in this allocation); returns at once."""
        if self.job_id is not None:
            return
        from monarch_cy._hosts.attach import at_shutdown, ensure_controller_node, get_hub
        ip = self._controller_ip()
        node = ensure_controller_node(None, None, host=ip)
        hub = get_hub(node)
        self._dialin = hub.dialin or hub.listen(f"tcp://{ip}:{self.port}")
        env = dict(os.environ)
        env.pop("MONARCH_CY_JOB_SECRET_FILE", None)
        if self.secret_file:
            from monarch_cy._transport.secret import write_secret_file
            write_secret_file(self.secret_file, node.keys.secret)
            env["MONARCH_CY_JOB_SECRET_FILE"] = self.secret_file
            env.pop("MONARCH_CY_JOB_SECRET", None)
        else:
            env["MONARCH_CY_JOB_SECRET"] = node.keys.secret.hex()
        cmd = self._agent_cmd(self._dialin.addr)
        inside = self.use_allocation if self.use_allocation is not None else \
            "SLURM_JOB_ID" in os.environ
        if inside:
            self._start_step(cmd, env)
        else:
            self._submit(cmd, env)
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, self.job_id if not inside else "-",
             str(self._srun.pid if self._srun else 0)],
            stdin=subprocess.PIPE, start_new_session=True)
        at_shutdown(self.kill)

    def _sbatch_script(self, cmd: list) -> str:
        import shlex
        n = self.nodes
        lines = ["#!/bin/bash", f"#SBATCH --job-name={self.job_name}",
                 f"#SBATCH --nodes={n}", "#SBATCH --ntasks-per-node=1",
                 f"#SBATCH --output={self.log_dir}/slurm-%j-{self.job_name}.out"]
        for flag, v in (("time", self.time_limit), ("partition", self.partition),
                        ("gpus-per-node", self.gpus_per_node),
                        ("cpus-per-task", self.cpus_per_task), ("mem", self.mem)):
            if v is not None:
                lines.append(f"#SBATCH --{flag}={v}")
        if self.exclusive:
            lines.append("#SBATCH --exclusive")
        lines += [f"#SBATCH {a}" for a in self.slurm_args]
        lines.append(f"srun --nodes={n} --ntasks-per-node=1 " + shlex.join(cmd))
        return "\n".join(lines) + "\n"

    def _submit(self, cmd: list, env: dict) -> None:
        os.makedirs(self.log_dir, exist_ok=True)
        r = _run(["sbatch", "--parsable"], input=self._sbatch_script(cmd), env=env)
        if r.returncode != 0:
            raise SchedulerError(f"sbatch rejected the job: {r.stderr.strip() or r.stdout.strip()}")
        self.job_id = r.stdout.strip().split(";")[0]
        P.log.info("SLURM job %s submitted for %d node(s)", self.job_id, self.nodes)

    def _start_step(self, cmd: list, env: dict) -> None:
        self.job_id = os.environ.get("SLURM_JOB_ID")
        self._errfile = tempfile.TemporaryFile()
        self._srun = subprocess.Popen(
            ["srun", f"--nodes={self.nodes}", "--ntasks-per-node=1", *self.slurm_args,
             *cmd], env=env, stdout=subprocess.DEVNULL, stderr=self._errfile,
            start_new_session=True)

    # -- state ---------------------------------------------------------------
    def _why_ended(self):
        """The scheduler's message if the job (or step) ended or failed, else None."""
        if self._srun is not None:
            if self._srun.poll() is None:
                return None
            self._errfile.seek(0)
            msg = self._errfile.read().decode(errors="replace").strip()
            return SchedulerError(f"srun ended (status {self._srun.returncode}): "
                                  f"{msg[-2000:] or 'no message'}")
        now = time.monotonic()
        if now - self._last_poll < 1.0:
            return None
        self._last_poll = now
        r = _run(["squeue", "-h", "-j", self.job_id, "-o", "%T %r"])
        out = r.stdout.strip()
        if r.returncode == 0 and out and out.split()[0] == "PENDING" and \
                out.split()[-1] in _HOPELESS:
            return SchedulerError(f"SLURM job {self.job_id} cannot start: {out}")
        if r.returncode == 0 and out and out.split()[0] not in _TERMINAL:
            return None
        r2 = _run(["scontrol", "show", "job", self.job_id])
        m = re.search(r"JobState=(\S+) Reason=(\S+)", r2.stdout)
        what = f"{m.group(1)} ({m.group(2)})" if m else (out or r.stderr.strip() or "gone")
        return SchedulerError(f"SLURM job {self.job_id} ended before its agents "
                              f"connected: {what}")

    def state(self, timeout: float | None = None) -> JobState:
        """Wait for every node's agent; the host meshes by name."""
        if self._state is not None:
            return self._state
        if self.job_id is None:
            self.apply()
        t = timeout or self.job_start_timeout or 600.0
        try:
            hosts = self._dialin.wait(self.nodes, t, abort=self._why_ended)
        except Exception:
            self.kill()
            raise
        self._state = split_meshes(self.meshes, hosts)
        return self._state

    def kill(self) -> None:
        """Cancel the job (or end the step); idempotent."""
        if self.job_id is not None and self._srun is None:
            _run(["scancel", self.job_id])
        if self._srun is not None and self._srun.poll() is None:
            self._srun.terminate()
            try:
                self._srun.wait(5)
            except subprocess.TimeoutExpired:
                self._srun.kill()
                self._srun.wait()
        if self._watchdog is not None:
            try:
                self._watchdog.stdin.close()
                self._watchdog.wait(10)
            except Exception:
                pass
            self._watchdog = None
