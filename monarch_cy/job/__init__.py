"""monarch_cy.job: where a controller's hosts come from (Monarch's ``monarch.job`` shape).

Re-exports only; the implementation lives in :mod:`monarch_cy._hosts`.  See
``docs/jobs.md`` and ``docs/multihost.md``.
"""

from monarch_cy._errors import (HostError, HostLostError, HostRefusedError,
                                      HostUnreachableError, SchedulerError)
from monarch_cy._hosts.exec_command import exec_command
from monarch_cy._hosts.job import DEFAULT_JOB_PATH, JobState, JobTrait
from monarch_cy._hosts.job_cache import job_load, job_loads
from monarch_cy._hosts.kubernetes import KubernetesJob
from monarch_cy._hosts.local_jobs import LocalJob, ProcessJob, hosts_from_config
from monarch_cy._hosts.port_forward import PortForwarder
from monarch_cy._hosts.shell import shell
from monarch_cy._hosts.slurm import SlurmJob
from monarch_cy._telemetry.config import TelemetryConfig

__all__ = [
    "DEFAULT_JOB_PATH",
    "HostError",
    "HostLostError",
    "HostRefusedError",
    "HostUnreachableError",
    "JobState",
    "JobTrait",
    "KubernetesJob",
    "LocalJob",
    "PortForwarder",
    "ProcessJob",
    "SchedulerError",
    "SlurmJob",
    "TelemetryConfig",
    "exec_command",
    "hosts_from_config",
    "job_load",
    "job_loads",
    "shell",
]
