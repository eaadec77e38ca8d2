"""``NcclCommunicator``: the ``Group`` API on GPUs, over NCCL (CUDA) or RCCL (ROCm).

Bounded waiting, thought through:

* Init uses a **non-blocking** communicator (``ncclCommInitRankConfig`` with
  ``blocking=0``, NCCL/RCCL >= 2.14): the call returns at once and we poll
  ``ncclCommGetAsyncError`` until it leaves ``ncclInProgress``.  A rank that
  never joins therefore costs ``timeout`` seconds, then ``ncclCommAbort`` and
  :class:`CollectiveTimeout` -- never a hang.  Older libraries fall back to the
  blocking ``ncclCommInitRank``, whose wait is unbounded (documented).
* Each operation is enqueued on a stream and an event is recorded after it.
  Waiting (``async_op=False``, or ``Work.wait()``) polls that event *and*
  ``ncclCommGetAsyncError``: the event done -> complete; an asynchronous error
  (NCCL's proxy thread saw a peer's socket close: ``ncclRemoteError``,
  ``ncclSystemError``) -> abort and :class:`CollectiveError`; the deadline
  passed (a peer that died over NVLink/shared memory leaves kernels spinning
  and raises no error) -> abort and :class:`CollectiveTimeout`.  Aborting
  makes NCCL's kernels return, so the stream drains and no GPU stays stuck.
  The host sleeps between polls with the GIL released (10 us growing to 1 ms).
* A polling host thread per wait rather than a watchdog thread: nothing runs
  behind the user's back, and work launched with ``async_op=True`` and never
  waited for is checked by the next ``wait()`` or by :meth:`check`.
* A ``Work`` dropped before it completed hands its event and its buffers to the
  communicator, which frees them once the device is done: at its next operation,
  or at ``close()`` (which waits for them).  After ``abort()`` they are not freed.
* Lifetime (:class:`monarch_cy._resource.Abortable`): ``close()`` is
  ``ncclCommDestroy`` after the enqueued work; ``abort()`` and the finalizer of
  a communicator dropped unclosed are ``ncclCommAbort``, which never waits for
  peers.  A forked child frees nothing (the parent owns the communicator).

``async_op=False`` makes the host wait for the operation (as gloo does), so
code is identical on both backends; for overlap pass ``async_op=True`` and wait
later.  ``stream=None`` means torch's current stream on the device for torch
tensors, and the legacy default stream for ``monarch_cy.gpu`` memory; a
``monarch_cy.gpu.Stream`` or ``torch.cuda.Stream`` picks another.
"""

from __future__ import annotations

import time
from typing import Any

from monarch_cy._collectives._buffers import Buffer, check_gather_sizes, describe
from monarch_cy._errors import CollectiveError, CollectiveTimeout, NcclError
from monarch_cy._collectives._group import Group, ReduceOp, Work, as_reduce_op, check_rank
from monarch_cy._collectives._rendezvous import UniqueId

__all__ = ["NcclCommunicator"]

_NCCL_OPS = {ReduceOp.SUM: 0, ReduceOp.PROD: 1, ReduceOp.MAX: 2, ReduceOp.MIN: 3, ReduceOp.AVG: 4}
_IN_PROGRESS = 7


def _nccl():
    from monarch_cy import _nccl_shim
    from monarch_cy._collectives._nccl_loader import ensure_loaded

    ensure_loaded()
    return _nccl_shim


def _rt():
    from monarch_cy._gpu._device import shim

    return shim()


def _comm_abort(handle: int) -> None:
    """What ``abort()`` and the finalizer run (``NcclCommunicator._own``):
    ``ncclCommAbort``, which never waits for peers."""
    from monarch_cy import _nccl_shim

    try:
        _nccl_shim.commAbort(handle)
    except NcclError:
        pass  # aborting a broken communicator may report the breakage again


class _NcclWork(Work):
    def __init__(self, comm: "NcclCommunicator", op: str, event: int, keep: tuple) -> None:
        self._comm = comm
        self._op = op
        self._event = event
        self._keep = keep  # the buffers, alive until complete
        self._done = False

    def is_completed(self) -> bool:
        if self._done:
            return True
        if _rt().eventQuery(self._event):
            self._finish()
        return self._done

    def _finish(self) -> None:
        self._done = True
        self._keep = ()
        ev, self._event = self._event, 0
        if ev:
            try:
                _rt().eventDestroy(ev)
            except Exception:  # noqa: BLE001 - the operation itself succeeded
                pass

    def __del__(self) -> None:
        # Dropped before completion: the communicator keeps the event and the buffers
        # until the device is done with them (swept at its next operation or close).
        if not self._done and self._event:
            try:
                self._comm._orphans.append((self._event, self._keep))
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass

    def wait(self, timeout: float | None = None) -> None:
        if self._done:
            return
        limit = self._comm.timeout if timeout is None else float(timeout)
        rt = _rt()
        self._comm._poll(self._op, limit, lambda: rt.eventQuery(self._event))
        self._finish()


class NcclCommunicator(Group):
    """One rank of an NCCL/RCCL communicator on one GPU.

    Every rank calls ``NcclCommunicator(rank, world_size, unique_id, device=...)``
    with the same ``unique_id`` (made once by :meth:`UniqueId.generate`); the
    call returns when all ranks joined (bounded by ``timeout``, see module doc).
    """

    backend = "nccl"

    def __init__(
        self,
        rank: int,
        world_size: int,
        unique_id: UniqueId,
        *,
        device: Any = None,
        timeout: float = 300.0,
        check: bool = False,
    ) -> None:
        super().__init__(rank, world_size, timeout, check)
        if not isinstance(unique_id, UniqueId):
            raise TypeError(f"unique_id must be a UniqueId, got {type(unique_id).__name__}")
        nccl = _nccl()
        self.device = self._resolve_device(device)
        self.nonblocking = nccl.has("CommInitRankConfig")
        self._orphans = []      # (event, buffers) of works dropped before completion
        self._handle = 0
        from monarch_cy._gpu._device import on_device

        with on_device(self.device):
            if self.nonblocking:
                handle, _ = nccl.commInitRankConfig(world_size, unique_id.raw, rank, False)
                self._adopt(handle)
                self._poll("init", self.timeout, None)
            else:
                self._adopt(nccl.commInitRank(world_size, unique_id.raw, rank))

    @staticmethod
    def _resolve_device(device: Any) -> int:
        rt = _rt()
        if device is None:
            return rt.getDevice()
        ordinal = getattr(device, "ordinal", None)
        if ordinal is None:
            ordinal = getattr(device, "index", device)  # torch.device
        if isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal < 0:
            raise ValueError(f"device must be an ordinal, a monarch_cy.gpu.Device or a cuda torch.device, got {device!r}")
        count = rt.getDeviceCount()
        if ordinal >= count:
            raise ValueError(f"device {ordinal} does not exist: this process sees {count} device(s)")
        return ordinal

    def _adopt(self, handle: int) -> None:
        self._handle = handle
        self._barrier_buf = None
        self._own(_comm_abort, handle)

    @property
    def handle(self) -> int:
        """The raw ``ncclComm_t`` (for the flat tier); raises once closed."""
        self._check_open()
        return self._handle

    # -- waiting ----------------------------------------------------------
    def _poll(self, op: str, limit: float, done) -> None:
        """Wait until ``done()`` (or, with ``done=None``, until the communicator is
        no longer in progress), watching for asynchronous errors, for at most
        ``limit`` seconds.  On error or timeout the communicator is aborted."""
        nccl = _nccl()
        deadline = time.monotonic() + limit
        nap = 1e-5
        while True:
            if self._aborted is not None:
                from monarch_cy._errors import GroupAbortedError

                raise GroupAbortedError(f"NcclCommunicator was aborted while waiting for {op}: {self._aborted}")
            state = nccl.commGetAsyncError(self._handle)
            if state not in (0, _IN_PROGRESS):
                err = NcclError(state, nccl.getErrorString(state), nccl.getLastError(self._handle), op)
                self.abort(reason=f"{op}: {err}")
                raise CollectiveError(op, f"{err}; communicator aborted")
            if state == 0 and (done is None or done()):
                return
            if time.monotonic() > deadline:
                self.abort(reason=f"{op} not complete within {limit:g} s")
                raise CollectiveTimeout(op, f"not complete within {limit:g} s; communicator aborted", limit)
            time.sleep(nap)
            nap = min(nap * 2, 1e-3)

    def check(self) -> None:
        """Raise (and abort) if the communicator has an asynchronous error; never blocks."""
        self._check_open()
        state = _nccl().commGetAsyncError(self._handle)
        if state not in (0, _IN_PROGRESS):
            self._poll("check", 0.0, None)

    # -- arguments ----------------------------------------------------------
    def _buf(self, buf: Any, param: str, dtype: Any) -> Buffer:
        self._check_open()
        b = describe(buf, param, dtype=dtype)
        if b.device != self.device:
            where = "the host" if b.device is None else f"device {b.device}"
            raise ValueError(f"{param} is on {where}; this communicator is on device {self.device}")
        return b

    def _stream(self, stream: Any, first: Buffer) -> int:
        if stream is None:
            if hasattr(first.obj, "data_ptr"):
                import torch

                return torch.cuda.current_stream(self.device).cuda_stream
            return 0
        from monarch_cy.gpu import Stream

        if isinstance(stream, Stream):
            stream._check_open()
            if stream.device.ordinal != self.device:
                raise ValueError(f"stream is on device {stream.device.ordinal}; this communicator is on device {self.device}")
            return stream.handle
        handle = getattr(stream, "cuda_stream", None)
        if isinstance(handle, int):
            return handle
        raise TypeError(f"stream must be None, a monarch_cy.gpu.Stream or a torch.cuda.Stream, got {stream!r}")

    def _launch(self, op: str, call, stream: int, async_op: bool, keep: tuple):
        from monarch_cy._gpu._device import on_device

        rt = _rt()
        with on_device(self.device):
            if self._orphans:
                self._sweep_orphans()
            try:
                busy = call()
            except NcclError as e:
                self.abort(reason=f"{op}: {e}")
                raise CollectiveError(op, f"{e}; communicator aborted") from None
            if busy:
                self._poll(op, self.timeout, None)
            event = rt.eventCreateWithFlags(rt.EVENT_DISABLE_TIMING)
            rt.eventRecord(event, stream)
        work = _NcclWork(self, op, event, keep)
        if async_op:
            return work
        work.wait()
        return None

    def _exchange_ints(self, values: list[int]) -> list[list[int]]:
        import struct

        from monarch_cy.gpu import DeviceBuffer

        rt = _rt()
        n = len(values)
        buf = DeviceBuffer(8 * n * (self.size + 1), self.device)
        try:
            mine = struct.pack(f"<{n}q", *values)
            host = bytearray(mine)
            rt.memcpy(buf.ptr, _addr_of(host), len(host), rt.MEMCPY_HOST_TO_DEVICE)
            recv = buf.ptr + 8 * n
            self._launch("check", lambda: _nccl().allGather(buf.ptr, recv, n, 4, self._handle, 0), 0, False, (buf,))
            out = bytearray(8 * n * self.size)
            rt.memcpy(_addr_of(out), recv, len(out), rt.MEMCPY_DEVICE_TO_HOST)
            flat = struct.unpack(f"<{n * self.size}q", bytes(out))
            return [list(flat[i * n:(i + 1) * n]) for i in range(self.size)]
        finally:
            buf.close()

    # -- operations -----------------------------------------------------------
    def all_reduce(self, tensor, op="sum", *, stream=None, async_op=False, dtype=None):
        """Reduce ``tensor`` over all ranks, in place on every rank."""
        b = self._buf(tensor, "tensor", dtype)
        rop = as_reduce_op(op)
        self._agree("all_reduce", _NCCL_OPS[rop], b.code, b.count, -1)
        s = self._stream(stream, b)
        h = self._handle
        return self._launch("all_reduce", lambda: _nccl().allReduce(b.ptr, b.ptr, b.count, b.code, _NCCL_OPS[rop], h, s), s, async_op, (tensor,))

    def broadcast(self, tensor, root=0, *, stream=None, async_op=False, dtype=None):
        """Copy ``root``'s ``tensor`` into every rank's ``tensor``."""
        b = self._buf(tensor, "tensor", dtype)
        root = check_rank(root, self.size, "root")
        self._agree("broadcast", 0, b.code, b.count, root)
        s = self._stream(stream, b)
        h = self._handle
        return self._launch("broadcast", lambda: _nccl().broadcast(b.ptr, b.ptr, b.count, b.code, root, h, s), s, async_op, (tensor,))

    def reduce(self, tensor, root=0, op="sum", *, stream=None, async_op=False, dtype=None):
        """Reduce into ``root``'s ``tensor``; other ranks' tensors are left unspecified."""
        b = self._buf(tensor, "tensor", dtype)
        root = check_rank(root, self.size, "root")
        rop = as_reduce_op(op)
        self._agree("reduce", _NCCL_OPS[rop], b.code, b.count, root)
        s = self._stream(stream, b)
        h = self._handle
        return self._launch("reduce", lambda: _nccl().reduce(b.ptr, b.ptr, b.count, b.code, _NCCL_OPS[rop], root, h, s), s, async_op, (tensor,))

    def all_gather(self, output, input, *, stream=None, async_op=False, dtype=None):
        """Rank ``i``'s ``input`` lands in the ``i``-th of ``size`` equal slices of ``output``."""
        o = self._buf(output, "output", dtype)
        i = self._buf(input, "input", dtype)
        check_gather_sizes("all_gather", o, i, self.size, "output", "input")
        self._agree("all_gather", 0, i.code, i.count, -1)
        s = self._stream(stream, i)
        h = self._handle
        return self._launch("all_gather", lambda: _nccl().allGather(i.ptr, o.ptr, i.count, i.code, h, s), s, async_op, (output, input))

    def reduce_scatter(self, output, input, op="sum", *, stream=None, async_op=False, dtype=None):
        """Reduce ``input`` over all ranks; rank ``i`` gets the ``i``-th of ``size`` slices in ``output``."""
        o = self._buf(output, "output", dtype)
        i = self._buf(input, "input", dtype)
        check_gather_sizes("reduce_scatter", i, o, self.size, "input", "output")
        rop = as_reduce_op(op)
        self._agree("reduce_scatter", _NCCL_OPS[rop], o.code, o.count, -1)
        s = self._stream(stream, o)
        h = self._handle
        return self._launch(
            "reduce_scatter", lambda: _nccl().reduceScatter(i.ptr, o.ptr, o.count, o.code, _NCCL_OPS[rop], h, s),
            s, async_op, (output, input),
        )

    def send(self, tensor, peer, *, stream=None, async_op=False, dtype=None):
        """Send ``tensor`` to ``peer`` (which must ``recv`` the same dtype and count)."""
        b = self._buf(tensor, "tensor", dtype)
        peer = self._peer(peer)
        s = self._stream(stream, b)
        h = self._handle
        return self._launch("send", lambda: _nccl().send(b.ptr, b.count, b.code, peer, h, s), s, async_op, (tensor,))

    def recv(self, tensor, peer, *, stream=None, async_op=False, dtype=None):
        """Receive into ``tensor`` what ``peer`` sends."""
        b = self._buf(tensor, "tensor", dtype)
        peer = self._peer(peer)
        s = self._stream(stream, b)
        h = self._handle
        return self._launch("recv", lambda: _nccl().recv(b.ptr, b.count, b.code, peer, h, s), s, async_op, (tensor,))

    def _peer(self, peer: Any) -> int:
        p = check_rank(peer, self.size, "peer")
        if p == self.rank:
            raise ValueError(f"peer must be another rank than this one ({self.rank})")
        return p

    def barrier(self, *, timeout: float | None = None) -> None:
        """Return once every rank reached the barrier: a 1-element all-reduce, waited for."""
        self._check_open()
        if self._barrier_buf is None:
            from monarch_cy.gpu import DeviceBuffer

            self._barrier_buf = DeviceBuffer(4, self.device)
        p = self._barrier_buf.ptr
        h = self._handle
        work = self._launch("barrier", lambda: _nccl().allReduce(p, p, 1, 2, 0, h, 0), 0, True, ())
        work.wait(timeout)

    def split(self, color: int | None, key: int | None = None) -> "NcclCommunicator | None":
        """Collective (``ncclCommSplit``): ranks with the same ``color`` form a new
        communicator ordered by ``(key, rank)``; ``color=None`` gets ``None``."""
        self._check_open()
        c = -1 if color is None else color
        k = self.rank if key is None else key
        for name, v in (("color", c), ("key", k)):
            if isinstance(v, bool) or not isinstance(v, int) or not -(2**31) < v < 2**31:
                raise TypeError(f"{name} must be a 32-bit int (or None for color), got {v!r}")
        nccl = _nccl()
        from monarch_cy._gpu._device import on_device

        with on_device(self.device):
            slot, busy = nccl.commSplit(self._handle, c if c >= 0 else nccl.SPLIT_NOCOLOR, k, not self.nonblocking)
            if busy:
                self._poll("split", self.timeout, None)  # raises (and leaks the slot) on failure
            if c >= 0:
                # A non-blocking split may write the new handle after the parent is
                # idle again (NCCL 2.28 on the H200 did): wait for it, bounded.
                self._poll("split", self.timeout, lambda: nccl.splitPeek(slot) != 0)
            handle = nccl.splitResult(slot)
        if not handle:
            return None
        child = NcclCommunicator.__new__(NcclCommunicator)
        Group.__init__(child, 0, 1, self.timeout, self._check_args)  # rank/size fixed below
        child._adopt(handle)
        child.device, child.nonblocking = self.device, self.nonblocking
        child._orphans = []
        child._parent = self
        if self.nonblocking:
            child._poll("split", self.timeout, None)
        child.size = nccl.commCount(handle)
        child.rank = nccl.commUserRank(handle)
        return child

    def _sweep_orphans(self, wait: bool = False) -> None:
        """Free the events (and release the buffers) of works dropped unwaited whose
        operations have completed; ``wait``: all of them, waiting for the device."""
        rt = _rt()
        orphans, self._orphans = self._orphans, []
        pending = []
        for ev, keep in orphans:
            try:
                if wait:
                    rt.eventSynchronize(ev)
                elif not rt.eventQuery(ev):
                    pending.append((ev, keep))
                    continue
                rt.eventDestroy(ev)
            except Exception:  # noqa: BLE001 - a broken context: nothing left to free
                pass
        self._orphans.extend(pending)

    # -- teardown (close/abort: Abortable) -----------------------------------
    def _close_owned(self, abort, args) -> None:
        """``close()`` in the owning process: free the barrier buffer, wait for the
        works dropped unwaited, then ``ncclCommDestroy`` (after enqueued work)."""
        if self._barrier_buf is not None:
            self._barrier_buf.close()
        from monarch_cy._gpu._device import on_device

        with on_device(self.device):
            self._sweep_orphans(wait=True)
            _nccl().commDestroy(self._handle)


def _addr_of(buf: bytearray) -> int:
    import ctypes

    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
