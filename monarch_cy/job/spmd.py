"""monarch_cy.job.spmd: SPMD jobs (Monarch's ``monarch.job.spmd``).

Re-exports only; see :mod:`monarch_cy._hosts.spmd_job` for what runs here.
"""

from monarch_cy._hosts.spmd_job import SPMDJob, StoreJob, serve

__all__ = ["serve", "SPMDJob", "StoreJob"]
