"""The picklable record of a registered buffer: everything a reader needs.

About 200 bytes pickled (more for a GPU buffer's IPC handle).  It names the owner
three ways -- actor-runtime proc key (supervision, TCP service), pid + start time
(cross-memory attach), host id + pid namespace (is the owner reachable by the
same-host backends) -- and carries the job fingerprint that other jobs refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BufferHandle"]


@dataclass(frozen=True)
class BufferHandle:
    job: bytes              # job fingerprint of the owner (see _identity)
    buf_id: int             # unique within the owner process
    owner_key: str          # the owner's proc key in the actor runtime
    owner_pid: int
    owner_start: int        # start time of owner_pid (guards against pid reuse)
    host: str               # hostname|boot_id
    pidns: int              # owner's pid namespace inode
    addr: int               # address in the owner process
    nbytes: int
    device: int | None      # None: host memory; else the owner's GPU ordinal
    readonly: bool
    lease_fd: int           # the owner's lease table: its fd number there, its id,
    lease_id: int           # and this buffer's cell in it (see _leases)
    cell: int
    token: int              # the cell holds it while the buffer is registered
    service: Any            # monarch_cy.actor.Port of the owner's service
    ipc: Any = None         # monarch_cy.gpu.IpcHandle (GPU memory), or None
    verbs: Any = None       # monarch_cy._verbs.RemoteRegion (ibverbs), or None

    @property
    def kind(self) -> str:
        return "cpu" if self.device is None else "gpu"
