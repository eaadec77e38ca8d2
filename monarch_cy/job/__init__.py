"""monarch_cy.job: where a controller's hosts come from (Monarch's ``monarch.job`` shape).

Re-exports only; the implementation lives in :mod:`monarch_cy._hosts`.  See
``docs/multihost.md``.
"""

from monarch_cy._errors import (HostError, HostLostError, HostRefusedError,
                                      HostUnreachableError, SchedulerError)
from monarch_cy._hosts.job import JobState, JobTrait
from monarch_cy._hosts.kubernetes import KubernetesJob
from monarch_cy._hosts.slurm import SlurmJob

__all__ = [
    "HostError",
    "HostLostError",
    "HostRefusedError",
    "HostUnreachableError",
    "JobState",
    "JobTrait",
    "KubernetesJob",
    "SchedulerError",
    "SlurmJob",
]
