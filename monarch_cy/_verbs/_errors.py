"""Errors of the RDMA verbs tier.

* :class:`VerbsError` -- a verbs call or a work completion failed.  ``name`` is
  the status's symbolic name: for a completion the ``ibv_wc_status`` enum name
  (``IBV_WC_REM_ACCESS_ERR``) with libibverbs' own text (``ibv_wc_status_str``)
  in ``message``; for a call the errno name (``EINVAL``) with ``strerror``.
* :class:`VerbsUnavailable` -- verbs cannot be used here at all: no libibverbs,
  no RDMA subsystem in the kernel, no such device.  Also a ``RuntimeError``.
* :class:`VerbsTimeout` -- completions did not arrive in time.  Also a
  ``TimeoutError``.

All survive pickling with their attributes (meshes ship errors between
processes).  They belong in the tree of :mod:`monarch_cy._errors` under
``MonarchCyError``.
"""

from __future__ import annotations

from monarch_cy._errors import VerbsError, VerbsTimeout, VerbsUnavailable

__all__ = ["VerbsError", "VerbsUnavailable", "VerbsTimeout"]
