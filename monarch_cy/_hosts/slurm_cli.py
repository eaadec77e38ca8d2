"""The SLURM command-line tools as :class:`~.slurm.SlurmJob` uses them.

Every function here runs one of ``sbatch``, ``squeue``, ``scontrol``, ``scancel``
and, when the tool fails, raises :class:`SchedulerError` with the tool's own
message verbatim (its stderr, else its stdout), prefixed with what was being done
and, for a rejected submission, the ``SlurmJob`` parameter the message points at.
Nothing here keeps state: the job object does.
"""

from __future__ import annotations

import re
import shlex
import subprocess

from monarch_cy._hosts import protocol as P
from monarch_cy._errors import SchedulerError

__all__ = ["run", "said", "slurmctld_host", "submit", "job_info", "node_addrs",
           "cancel", "TERMINAL", "HOPELESS", "hopeless"]

TERMINAL = ("FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "COMPLETED", "NODE_FAIL",
            "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE", "SPECIAL_EXIT", "REVOKED")

# pending reasons that never clear by waiting
HOPELESS = ("PartitionNodeLimit", "PartitionConfig", "BadConstraints", "PartitionDown",
            "PartitionInactive", "InvalidAccount", "InvalidQOS", "QOSMaxNodePerJobLimit",
            "PartitionTimeLimit")

# words of sbatch's messages -> the option they are about
_KEYWORDS = (("partition", ("--partition", "-p")), ("node name", ("--nodelist", "-w")),
             ("nodelist", ("--nodelist", "-w")), ("gres", ("--gpus-per-node", "--gres")),
             ("generic resource", ("--gpus-per-node", "--gres")),
             ("time limit", ("--time", "-t")), ("memory", ("--mem",)),
             ("account", ("--account", "-A")), ("qos", ("--qos", "-q")),
             ("node count", ("--nodes", "-N")))


def run(argv: list, *, input: str | None = None, env: dict | None = None,
        timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Run a SLURM tool; ``SchedulerError`` when it is missing or hangs."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              input=input, env=env)
    except FileNotFoundError:
        raise SchedulerError(f"{argv[0]} not found: is this a SLURM cluster (is "
                             f"{argv[0]} on PATH)?") from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"`{shlex.join(argv)}` did not finish within "
                             f"{timeout:.0f} s") from None


def said(r: subprocess.CompletedProcess) -> str:
    """What a tool said: its stderr, else its stdout, verbatim (stripped)."""
    return (r.stderr or "").strip() or (r.stdout or "").strip() or \
        f"(exit status {r.returncode}, no message)"


def slurmctld_host() -> str:
    """The first ``SlurmctldHost`` (its address when the config gives one), from
    ``scontrol show config``; ``SchedulerError`` with scontrol's message if that
    fails (slurmctld down or unreachable, bad ``SLURM_CONF``)."""
    r = run(["scontrol", "show", "config"])
    if r.returncode != 0:
        raise SchedulerError(
            f"cannot find this controller's address for the nodes: `scontrol show "
            f"config` failed: {said(r)}\n(is slurmctld up and reachable from here? "
            "controller_host=, MONARCH_CY_HOST or MONARCH_CY_CONTROLLER_INTERFACE skip "
            "this look-up, but sbatch needs slurmctld too)")
    m = re.search(r"^SlurmctldHost\[0\]\s*=\s*(\S+?)(?:\((\S+)\))?\s*$", r.stdout, re.M)
    if not m:
        raise SchedulerError("`scontrol show config` names no SlurmctldHost[0]; pass "
                             "controller_host= (this machine's address the nodes reach)")
    return m.group(2) or m.group(1)


def _blame(job, msg: str) -> list:
    """The parameters (``name=value``) a rejection message points at."""
    low = msg.lower()
    hit = []
    for name, value, opt in job.directives():
        flag = opt.split("=", 1)[0].split()[0]
        val = opt.split("=", 1)[1] if "=" in opt else opt[len(flag):].strip()
        if (opt.lower() in low or (val and len(val) > 2 and val.lower() in low) or
                any(k in low and flag in flags for k, flags in _KEYWORDS)):
            hit.append(f"{name}={value!r}")
    return hit


def submit(job, script: str, env: dict) -> str:
    """``sbatch`` the script; the job id, or ``SchedulerError`` with sbatch's words."""
    r = run(["sbatch", "--parsable"], input=script, env=env)
    if r.returncode != 0:
        msg = said(r)
        hit = _blame(job, msg)
        where = (" (" + ", ".join(hit) + ")") if hit else ""
        raise SchedulerError(f"sbatch rejected the job{where}: {msg}")
    return r.stdout.strip().split(";")[0]


def job_info(job_id: str) -> dict | None:
    """``{"state", "reason", "nodes"}`` of a job (``scontrol show job``; ``squeue`` for
    a job slurmctld already forgot), None when SLURM knows no such job."""
    r = run(["scontrol", "show", "job", "-o", job_id])
    if r.returncode == 0:
        f = dict(m.groups() for m in re.finditer(r"(\w[\w/:]*)=(\S*)", r.stdout))
        return {"state": f.get("JobState", "?"), "reason": f.get("Reason", "?"),
                "nodes": f.get("NodeList", "")}
    if "Invalid job id" in said(r):
        return None
    raise SchedulerError(f"`scontrol show job {job_id}` failed: {said(r)}")


def hopeless(info: dict) -> bool:
    return info["state"] == "PENDING" and info["reason"].split(",")[0] in HOPELESS


def node_addrs(nodelist: str) -> list:
    """The address of each node of a hostlist expression, in ``SLURM_NODEID`` order
    (``NodeAddr`` of ``scontrol show node``: nodes need not resolve by name here)."""
    r = run(["scontrol", "show", "hostnames", nodelist])
    if r.returncode != 0:
        raise SchedulerError(f"`scontrol show hostnames {nodelist}` failed: {said(r)}")
    names = r.stdout.split()
    r = run(["scontrol", "show", "node", "-o", nodelist])
    if r.returncode != 0:
        raise SchedulerError(f"`scontrol show node {nodelist}` failed: {said(r)}")
    addr = {}
    for line in r.stdout.splitlines():
        n, a = re.search(r"NodeName=(\S+)", line), re.search(r"NodeAddr=(\S+)", line)
        if n:
            addr[n.group(1)] = a.group(1) if a else n.group(1)
    return [P.resolve(addr.get(n, n)) for n in names]


def cancel(job_id: str) -> str | None:
    """``scancel`` a job (or ``JOB.STEP``); scancel's message if it failed."""
    r = run(["scancel", job_id])
    return None if r.returncode == 0 else said(r)
