"""Errors of the collectives layer; every one survives ``pickle``.

* :class:`NcclError`: an NCCL/RCCL call returned a failure result (with the
  library's name for it and ``ncclGetLastError``'s text).
* :class:`NcclUnavailable`: no NCCL/RCCL library could be loaded, or the one
  found is older than the minimum supported version (lists every place tried).
* :class:`CollectiveTimeout`: an operation did not complete in time; the
  communicator was aborted so that no kernel or thread is left spinning.
* :class:`CollectiveError`: any other failure of a group (the gloo backend's
  errors are re-raised as this, with the original text), including a peer that
  died mid-operation.
* :class:`GroupAbortedError`: the group was aborted (by ``abort()``, a timeout or
  an asynchronous error); it cannot be used again.

All are defined in the flat :mod:`monarch_cy._errors`, the one home of the exception
tree (the flat tier ``_nccl_shim`` raises the NCCL ones and may import nothing above
itself), and re-exported here, their documented home: the classes are the same
objects and keep this module as their ``__module__``.
"""

from __future__ import annotations

from monarch_cy._errors import NCCL_RESULT_NAMES as RESULT_NAMES  # noqa: F401
from monarch_cy._errors import (CollectiveError, CollectiveTimeout,  # noqa: F401
                                GroupAbortedError, NcclError,
                                NcclUnavailable)

__all__ = [
    "NcclError",
    "NcclUnavailable",
    "CollectiveError",
    "CollectiveTimeout",
    "GroupAbortedError",
    "RESULT_NAMES",
]
