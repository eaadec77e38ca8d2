"""``RDMABuffer``: memory of one process, readable and writable by the others.

``RDMABuffer(data)`` registers ``data`` (a contiguous CPU or GPU tensor, a
C-contiguous memoryview or buffer, a ``monarch_cy.gpu`` memory object) without
copying, seen as one flat run of ``size()`` bytes.  The object pickles into a
small handle: send it to any actor of the same job, which then calls
``read_into``/``write_from`` on it; the bytes move between the two processes'
memories directly (see :mod:`._select` for the backend of each pair) -- the
controller is never in the data path.

Lifetime: the owner process keeps the registered memory alive (it holds a
reference to ``data``) until the buffer is dropped, by ``drop()`` on any copy of
the handle -- not when the Python object goes away, because copies of its handle
may still be in use elsewhere.  After a drop every operation on any copy fails
with ``BufferDroppedError``.  ``drop()`` waits for the same-host and TCP operations
in flight on the buffer (see :mod:`._leases`), so once it has returned no read or
write touches the memory any more: an operation either completed before, or
fails with ``BufferDroppedError``.

Concurrency: like RDMA, nothing orders a reader against the owner's own writes
to the memory; the owner finishes writing (and, for GPU memory, synchronises its
stream) before it lets readers in.
"""

from __future__ import annotations

from monarch_cy._checks import check_int
from monarch_cy._errors import BufferDroppedError, ForeignJobError
from monarch_cy._rdma_buffer import _engine, _identity, _owner, _samehost, _select, _target
from monarch_cy._rdma_buffer._handle import BufferHandle
from monarch_cy._rdma_buffer._local import as_span

__all__ = ["RDMABuffer", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 60.0


class RDMABuffer:
    """A registered span of memory and the handle to reach it (module docstring)."""

    __slots__ = ("_h", "_dropped")

    def __init__(self, data) -> None:
        _target.check()                  # a malformed rdma_ibverbs_target: RdmaInitError
        span = as_span(data, "data", writable=False)
        if span.nbytes == 0:
            raise ValueError("data has 0 bytes; an RDMABuffer needs at least one byte")
        self._h = _owner.service().register(span)
        self._dropped = False

    @classmethod
    def _from_handle(cls, h: BufferHandle) -> "RDMABuffer":
        self = cls.__new__(cls)
        self._h = h
        self._dropped = False
        return self

    def __reduce__(self):
        return (RDMABuffer._from_handle, (self._h,))

    # -- information -----------------------------------------------------------
    def size(self) -> int:
        """Size of the buffer in bytes."""
        return self._h.nbytes

    @property
    def owner(self) -> str:
        """The owner process's key in the actor runtime (its address; unique in the job)."""
        return self._h.owner_key

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:<ordinal>"`` (the ordinal in the owner process)."""
        return "cpu" if self._h.device is None else f"cuda:{self._h.device}"

    def backend_for(self, local="cpu", backend: str | None = None) -> str:
        """The backend a read/write of this buffer from this process would use now,
        with local memory ``local`` (``"cpu"``, ``"gpu"``, or the memory itself)."""
        self._check_job()
        kind = local if local in ("cpu", "gpu") else as_span(local, "local", False).kind
        return _select.choose(self._h, kind, _select.requested(backend))

    def __repr__(self) -> str:
        state = " dropped" if self._dropped else ""
        return f"<RDMABuffer {self.size()} bytes on {self.device} of {self.owner}{state}>"

    # -- operations ------------------------------------------------------------
    def _check_job(self) -> None:
        if self._h.job != _identity.job_fingerprint():
            raise ForeignJobError(
                f"this RDMABuffer handle belongs to another job (fingerprint "
                f"{self._h.job.hex()}, this job {_identity.job_fingerprint().hex()}); handles "
                "only work within the job whose process registered them")

    def _check_usable(self) -> None:
        self._check_job()
        if self._dropped:
            raise BufferDroppedError(f"{self!r} was dropped; it cannot be read or written")

    def read_into(self, dst, offset: int = 0, *, timeout: float = DEFAULT_TIMEOUT,
                  backend: str | None = None):
        """Copy bytes ``[offset, size())`` of the buffer to the start of ``dst``.

        ``dst`` (contiguous, writable; CPU or GPU) must hold at least
        ``size() - offset`` bytes.  Returns a Future of None (as Monarch's).
        Argument errors raise here; a dropped buffer, a dead owner or a timeout
        fail the future.
        """
        return _engine.submit([self._transfer(True, dst, offset)], timeout, backend)

    def write_from(self, src, offset: int = 0, *, timeout: float = DEFAULT_TIMEOUT,
                   backend: str | None = None):
        """Copy all of ``src`` (contiguous; CPU or GPU) into the buffer at ``offset``.

        ``offset + src's size`` must not exceed ``size()``.  Returns a Future of None.
        """
        return _engine.submit([self._transfer(False, src, offset)], timeout, backend)

    def _transfer(self, read: bool, local, offset) -> "_engine.Transfer":
        self._check_usable()
        offset = check_int("offset", offset)
        size = self.size()
        if read:
            if not 0 <= offset < size:
                raise ValueError(f"offset must be in [0, {size}) for this {size}-byte buffer, "
                                 f"got {offset}")
            span = as_span(local, "dst", writable=True)
            n = size - offset
            if span.nbytes < n:
                raise ValueError(
                    f"dst holds {span.nbytes} bytes but reading this {size}-byte buffer from "
                    f"offset {offset} needs {n}; pass a larger dst or a larger offset")
        else:
            if self._h.readonly:
                raise ValueError(f"{self!r} was registered over read-only memory; it cannot "
                                 "be written")
            span = as_span(local, "src", writable=False)
            n = span.nbytes
            if offset < 0 or offset + n > size:
                raise ValueError(
                    f"src holds {n} bytes, which do not fit at offset {offset} of this "
                    f"{size}-byte buffer")
        return _engine.Transfer(read, self._h, span, offset, n)

    def drop(self):
        """Release the registration (for every copy of the handle); Future of None.

        The owner zeroes the buffer's cell (no operation starts after that),
        deregisters it, waits for the same-host and TCP operations in flight on it
        to end (or their processes to die), at most ``_leases.DROP_WAIT`` seconds,
        and only then lets go of the memory (its reference to ``data``).  In the
        owner process this blocks and returns a resolved future; elsewhere the
        future resolves once the owner has done it.  Past the bound the future
        fails with ``RDMATimeoutError`` (the buffer is dropped, its memory stays
        referenced until those operations end).  Idempotent.
        """
        from monarch_cy._actor.base.future import Future
        self._check_job()
        h = self._h
        self._dropped = True
        _samehost.forget(h)
        svc = _owner.current()
        if svc is not None and h.owner_key == _identity.this_proc_key():
            try:
                svc.drop(h.buf_id, h.token)
            except Exception as e:  # noqa: BLE001 - the future carries it
                return Future._resolved(None, e)
            return Future._resolved(None)
        fut = Future._make(None)

        def go():
            from monarch_cy._rdma_buffer import _owner_call
            try:
                _owner_call.request(h, "drop", (h.buf_id, h.token), DEFAULT_TIMEOUT)
            except BaseException as e:  # noqa: BLE001
                fut._set_exception(e)
            else:
                fut._set_result(None)
        _engine._executor().submit(go)
        return fut
