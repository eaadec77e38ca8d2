"""Which backend serves a pair of processes and memories; the override.

Backends, in the order ``auto`` tries them:

========== =========================================================================
``local``  the owner is this process: one copy
``ipc``    same host, the owner's memory is on a GPU: the runtime's IPC handle
``cma``    same host and pid namespace, owner memory on the CPU: cross-memory attach
``ibverbs`` both processes have a verbs device (and the buffer was registered)
``tcp``    anything else: chunked, parallel, over the actor transport
========== =========================================================================

``MONARCH_CY_RDMA_BACKEND`` (read at each call) or a ``backend=`` argument forces one;
``auto`` (the default) chooses as above.  A forced backend that cannot serve the
pair raises :class:`BackendUnavailableError` saying why -- never a silent
substitute.  Under ``auto``, a kernel that refuses cross-memory attach (EPERM) at
run time makes that owner's later operations use ``tcp`` (the refused operation is
retried there).

"Same host" is an equal ``hostname|boot_id`` (:mod:`monarch_cy._host_identity`);
``cma`` also needs the same pid namespace (the owner's pid must name the owner here).
"""

from __future__ import annotations

import os

from monarch_cy import _config
from monarch_cy._errors import BackendUnavailableError
from monarch_cy._host_identity import hostname_of
from monarch_cy._rdma_buffer import _identity, _verbs_backend

__all__ = ["NAMES", "ENV", "requested", "choose", "why_not", "refuse_cma"]

ENV = "MONARCH_CY_RDMA_BACKEND"
NAMES = _config.VARIABLES[ENV].choices     # ("auto", "local", "cma", "ipc", "ibverbs", "tcp")
_cma_refused: set = set()      # (owner_key) for which the kernel said EPERM


def requested(arg: str | None) -> str:
    """The backend asked for: ``arg`` if given, else the environment, else ``auto``."""
    if arg is not None:
        if not isinstance(arg, str) or arg.strip().lower() not in NAMES:
            raise ValueError(f"backend must be one of {', '.join(NAMES)}; got {arg!r}")
        return arg.strip().lower()
    return _config.rdma_backend()      # ValueError quoting a value not in NAMES


def refuse_cma(h) -> None:
    _cma_refused.add(h.owner_key)


def why_not(name: str, h, local_kind: str) -> str | None:
    """Why backend ``name`` cannot serve ``h`` from here (None when it can)."""
    same_proc = h.owner_pid == os.getpid() and h.host == _identity.host_id() \
        and h.pidns == _identity.pidns()
    same_host = h.host == _identity.host_id()
    if name == "tcp":
        return None
    if name == "local":
        return None if same_proc else "the buffer's owner is another process"
    if name == "ipc":
        if not same_host:
            return f"the owner runs on another host ({hostname_of(h.host)})"
        if h.device is None:
            return "the buffer is CPU memory (ipc serves GPU memory; use cma)"
        if h.ipc is None:
            return "the owner's GPU runtime could not export an IPC handle for it"
        if same_proc:
            return "the owner is this process (runtimes refuse to open their own IPC handles)"
        return None
    if name == "cma":
        if not same_host:
            return f"the owner runs on another host ({hostname_of(h.host)})"
        if h.pidns != _identity.pidns():
            return "the owner runs in another pid namespace"
        if h.device is not None:
            return "the buffer is GPU memory (cma serves CPU memory; use ipc)"
        if h.owner_key in _cma_refused:
            return "the kernel refused cross-memory attach to the owner (EPERM)"
        return None
    if name == "ibverbs":
        if h.verbs is None:
            return "the owner has no verbs device (the buffer has no registered region)"
        why = _verbs_backend.unavailable_reason()
        return None if why is None else f"no verbs device here: {why}"
    return f"unknown backend {name!r}"


def choose(h, local_kind: str, req: str = "auto") -> str:
    """The backend for ``h`` with local memory of ``local_kind`` (``cpu``/``gpu``)."""
    if req != "auto":
        why = why_not(req, h, local_kind)
        if why is not None:
            raise BackendUnavailableError(f"backend {req!r} cannot serve this buffer: {why}")
        return req
    for name in ("local", "ipc", "cma", "ibverbs"):
        if why_not(name, h, local_kind) is None:
            return name
    _warn_tcp()
    return "tcp"


_tcp_warned = []


def _warn_tcp() -> None:
    if not _tcp_warned:
        _tcp_warned.append(True)
        import warnings
        from monarch_cy._errors import RDMATcpFallbackWarning
        warnings.warn("RDMABuffer transfers between these processes use the TCP fallback "
                      "(no verbs device and no same-host path)", RDMATcpFallbackWarning,
                      stacklevel=4)
