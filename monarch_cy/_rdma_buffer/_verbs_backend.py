"""The ibverbs backend: one-sided RDMA READ/WRITE through :mod:`monarch_cy._verbs`.

Per process, made on first use: one device context (the first verbs device, or
``MONARCH_CY_RDMA_DEVICE``) and one protection domain.

* Owner side: every buffer is registered when it is made (host memory with
  ``ibv_reg_mr``; GPU memory through a dma-buf of its pages, else the device pointer
  itself where a peer-memory module exists); the handle carries the
  ``RemoteRegion``.  ``accept`` answers a reader's connection request (sent to the
  owner's service over the actor transport) with a queue pair of its own, kept
  for that reader.
* Reader side: one reliable-connected queue pair per owner process, connected on
  first use and cached (one operation at a time on it: a lock).  The local span is
  registered for the operation and deregistered after it.  An error completion
  leaves the queue pair dead: it is closed and the next operation reconnects.

Errors of an operation, as the reader raises them:

* the owner's death -- known to the actor runtime before the operation, or
  learnt while its completions are awaited (checked every ``CHECK_INTERVAL``
  seconds: the device may keep retrying a dead peer for a long time; soft-RoCE
  had not given up a minute after the owner was killed) -- is ``OwnerDiedError``;
* completions not all in by the deadline: ``RDMATimeoutError``;
* an error completion: the reader asks the owner's service why.  A dropped
  buffer's region is gone (``IBV_WC_REM_ACCESS_ERR``): ``BufferDroppedError``; an
  owner that died meanwhile (retries exhausted): ``OwnerDiedError``; an owner that
  answers that all is well: the ``VerbsError`` itself.
"""

from __future__ import annotations

import functools
import os
import threading
import time

from monarch_cy import _config
from monarch_cy._rdma_buffer import _target
from monarch_cy._rdma_buffer._local import Span

__all__ = ["available", "unavailable_reason", "device_name", "queue_pair_num", "register",
           "accept", "peers", "read", "write"]

CHECK_INTERVAL = 0.1   # seconds between looks at the owner's liveness while waiting

_lock = threading.Lock()
_state = None          # (pid, Context, ProtectionDomain)
_peers: dict = {}       # owner side: peer key -> QueuePair
_qps: dict = {}         # reader side: owner key -> [QueuePair, Lock]


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """Why ibverbs cannot be used in this process (None when it can)."""
    if not _config.rdma_verbs():
        return "MONARCH_CY_RDMA_VERBS=0"
    try:
        from monarch_cy._verbs import unavailable_reason as why
        return why()
    except Exception as e:  # noqa: BLE001 - any failure means no verbs here
        return f"{type(e).__name__}: {e}"


def available() -> bool:
    return unavailable_reason() is None


def _pd():
    global _state
    if _state is not None and _state[0] == os.getpid():
        return _state[2]
    with _lock:
        if _state is None or _state[0] != os.getpid():
            from monarch_cy._verbs import Context, ProtectionDomain
            ctx = Context(_target.nic() or _config.rdma_device())
            _state = (os.getpid(), ctx, ProtectionDomain(ctx))
        return _state[2]


def device_name() -> str:
    """The name of the verbs device this process uses (opened on first use)."""
    return _pd().context.name


def queue_pair_num(owner_key: str) -> int | None:
    """Reader side: the number of the live queue pair to ``owner_key`` (None: none)."""
    ent = _qps.get(owner_key)
    qp = ent[0] if ent is not None else None
    return None if qp is None or qp.closed else qp.qp_num


def register(span: Span):
    """Register ``span`` in this process's protection domain; returns the MemoryRegion."""
    from monarch_cy import _rdma
    pd = _pd()
    access = _rdma.ACCESS_REMOTE_READ if span.readonly else None
    if not span.on_gpu:
        return pd.register_address(span.addr, span.nbytes, keepalive=span.keep, access=access)
    return _register_device(pd, span, access)


def _register_device(pd, span: Span, access):
    from monarch_cy import _hip_shim

    def dmabuf(ptr, n):
        page = 1 << 16            # dma-buf exports whole (64 KiB-aligned on CUDA) pages
        base = ptr & ~(page - 1)
        end = (ptr + n + page - 1) & ~(page - 1)
        fd = _hip_shim.memGetDmaBufFd(base, end - base)
        dmabuf.offset = ptr - base
        return fd

    try:
        fd = dmabuf(span.addr, span.nbytes)
    except Exception:   # noqa: BLE001 - fall back to the pointer (peer memory)
        return pd.register_device(span.addr, span.nbytes, keepalive=span.keep, access=access)
    try:
        return pd.register_dmabuf(fd, dmabuf.offset, span.nbytes, span.addr,
                                  keepalive=span.keep, access=access)
    except Exception:   # noqa: BLE001
        return pd.register_device(span.addr, span.nbytes, keepalive=span.keep, access=access)
    finally:
        os.close(fd)


def accept(peer_key: str, endpoint: bytes) -> bytes:
    """Owner side: a queue pair connected to the reader's ``endpoint``; its endpoint."""
    from monarch_cy._verbs import QPEndpoint, QueuePair
    qp = QueuePair(_pd())
    qp.connect(QPEndpoint.from_bytes(endpoint))
    # The owner side is passive: only the runtime's news of the reader's death frees it.
    from monarch_cy._rdma_buffer import _watch
    _watch.on_death(_forget_peer)
    with _lock:
        old = _peers.pop(peer_key, None)
        _peers[peer_key] = qp
    if old is not None:
        old.close()
    return qp.endpoint.to_bytes()


def peers() -> list:
    """Owner side: the keys of the readers this process holds a queue pair for."""
    with _lock:
        return sorted(_peers)


def _forget_peer(proc_key: str, cause: str) -> None:
    with _lock:
        qp = _peers.pop(proc_key, None)
    if qp is not None:
        qp.close()


def _connected(h, timeout: float):
    from monarch_cy._rdma_buffer import _owner_call
    from monarch_cy._rdma_buffer._identity import this_proc_key
    from monarch_cy._verbs import QPEndpoint, QueuePair
    with _lock:
        ent = _qps.get(h.owner_key)
        if ent is None:
            ent = _qps[h.owner_key] = [None, threading.Lock()]
    if ent[0] is None or ent[0].closed:
        qp = QueuePair(_pd())
        peer = _owner_call.request(h, "qp", (this_proc_key(), qp.endpoint.to_bytes()), timeout)
        qp.connect(QPEndpoint.from_bytes(peer))
        ent[0] = qp
    return ent


def _run(h, span: Span, local_offset: int, offset: int, n: int, deadline: float,
         read: bool) -> None:
    from monarch_cy._rdma_buffer import _watch
    if n == 0:
        return
    with _lock:
        ent = _qps.setdefault(h.owner_key, [None, threading.Lock()])
    with ent[1]:
        left = max(0.1, deadline - time.monotonic())
        _connected(h, left)
        qp = ent[0]
        mr = register(Span(span.addr + local_offset, n, span.device, span.readonly or not read,
                            span.keep))
        try:
            remote_addr, _ = h.verbs.slice(offset, n)
            ops = [(mr.addr, mr.lkey, remote_addr, h.verbs.rkey, n)]
            try:
                (qp.read if read else qp.write)(
                    ops, timeout=max(0.1, deadline - time.monotonic()),
                    check=lambda: _watch.check_owner(h), check_interval=CHECK_INTERVAL)
            except BaseException as e:
                # The queue pair is dead (error completion) or has requests
                # outstanding (timeout, owner died): close it; the next operation
                # reconnects.
                qp.close()
                ent[0] = None
                err = _explain(h, e, read, deadline)
                if err is e:
                    raise
                raise err from e
        finally:
            mr.close()


def _explain(h, e: BaseException, read: bool, deadline: float) -> BaseException:
    """The error to raise for ``e``, a failed wait on ``h``'s owner (module docstring)."""
    from monarch_cy._errors import BufferDroppedError, OwnerDiedError, RDMATimeoutError
    from monarch_cy._rdma_buffer import _owner_call, _watch
    from monarch_cy._verbs import VerbsError, VerbsTimeout
    if not isinstance(e, VerbsError):
        return e                      # OwnerDiedError from the check, or an interrupt
    try:
        _watch.check_owner(h)
    except OwnerDiedError as died:
        return died
    what = "read" if read else "write"
    if isinstance(e, VerbsTimeout):
        return RDMATimeoutError(f"rdma {what} (ibverbs) did not complete within its timeout")
    # Ask the owner: dropped buffer, or dead (the wait for the answer is woken by
    # the runtime's news of the death); an owner that answers "alive" leaves `e`.
    try:
        _owner_call.request(h, "check", (h.buf_id, h.token),
                     min(10.0, max(1.0, deadline - time.monotonic())))
    except (BufferDroppedError, OwnerDiedError) as why:
        return why
    except RDMATimeoutError:
        pass
    return e


def read(h, span: Span, dst_offset: int, offset: int, n: int, deadline: float) -> None:
    _run(h, span, dst_offset, offset, n, deadline, True)


def write(h, span: Span, src_offset: int, offset: int, n: int, deadline: float) -> None:
    _run(h, span, src_offset, offset, n, deadline, False)
