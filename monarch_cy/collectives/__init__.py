"""Collectives: NCCL/RCCL communicators on GPUs, gloo groups on CPUs, one API (re-exports only).

Importing this module loads no NCCL/RCCL library and imports no torch; the
library is bound on first use (see :mod:`monarch_cy._collectives._nccl_loader`
for the search order).  See docs/collectives.md.
"""

from monarch_cy._errors import (
    CollectiveError,
    CollectiveTimeout,
    GroupAbortedError,
    NcclError,
    NcclUnavailable,
)
from monarch_cy._collectives._factory import BACKENDS, default_backend, make_group
from monarch_cy._collectives._gloo import GLOO_DTYPES, GlooGroup
from monarch_cy._collectives._mesh import (
    create_group,
    create_groups,
    destroy_group,
    group,
    group_names,
    setup_torch_distributed,
)
from monarch_cy._collectives._group import Group, ReduceOp, Work
from monarch_cy._collectives._nccl_comm import NcclCommunicator
from monarch_cy._collectives._nccl_loader import MIN_VERSION as NCCL_MIN_VERSION
from monarch_cy._collectives._rendezvous import TcpRendezvous, UniqueId, pick_free_port
from monarch_cy._collectives._torch_env import TORCH_ENV_DEFAULTS, setup_torch_env

__all__ = [
    "Group",
    "Work",
    "ReduceOp",
    "NcclCommunicator",
    "GlooGroup",
    "UniqueId",
    "TcpRendezvous",
    "make_group",
    "create_group",
    "create_groups",
    "destroy_group",
    "group",
    "group_names",
    "setup_torch_distributed",
    "default_backend",
    "pick_free_port",
    "setup_torch_env",
    "BACKENDS",
    "GLOO_DTYPES",
    "NCCL_MIN_VERSION",
    "TORCH_ENV_DEFAULTS",
    "NcclError",
    "NcclUnavailable",
    "CollectiveError",
    "CollectiveTimeout",
    "GroupAbortedError",
]
