"""TCP fallback: chunked reads and writes served by the owner's service.

Works between any two processes of a job (over the actor transport: ``ipc://``
sockets and one shared-memory copy within a host, CurveZMQ-authenticated TCP
across hosts).  The reader cuts the span into ``CHUNK``-byte pieces and keeps
``WINDOW`` of them in flight; the owner's service threads answer them in
parallel.  GPU memory on either side is staged through a pinned host buffer.

Blocking (runs in the engine's thread); one deadline bounds the whole operation.
The owner's death wakes it with ``OwnerDiedError`` (see :mod:`._watch`).
"""

from __future__ import annotations

import ctypes
import pickle

from monarch_cy._rdma_buffer import _watch
from monarch_cy._rdma_buffer._local import Span
from monarch_cy._rdma_buffer._owner_call import wait_answer

__all__ = ["read", "write", "CHUNK", "WINDOW"]

CHUNK = 8 << 20
WINDOW = 4


def _addr_of(buf) -> tuple[int, object]:
    from monarch_cy._hostmem import BufferPin
    pin = BufferPin(buf, False)
    return pin.address, pin


class _Staging:
    """Pinned host memory for GPU spans (allocated only when one is involved)."""

    def __init__(self, span: Span, n: int):
        self.buf = None
        if span.on_gpu:
            from monarch_cy import gpu
            self.buf = gpu.PinnedBuffer(n)

    def close(self):
        if self.buf is not None:
            self.buf.close()


def read(h, span: Span, dst_offset: int, offset: int, n: int, deadline: float) -> None:
    """Copy ``n`` bytes at ``offset`` of the remote buffer to ``span`` at ``dst_offset``."""
    from monarch_cy.actor import Channel
    chunks = [(o, min(CHUNK, n - o)) for o in range(0, n, CHUNK)]
    port, recv = Channel.open()
    staging = _Staging(span, min(CHUNK, n))
    try:
        with _watch.watching(h, recv):
            nxt = 0
            inflight = 0
            while nxt < len(chunks) and inflight < WINDOW:
                o, ln = chunks[nxt]
                h.service.send(("read", h.buf_id, h.token, offset + o, ln, port, nxt))
                nxt += 1
                inflight += 1
            while inflight:
                tag, data = wait_answer(recv, deadline, "rdma read (tcp)")
                inflight -= 1
                if nxt < len(chunks):
                    o2, ln2 = chunks[nxt]
                    h.service.send(("read", h.buf_id, h.token, offset + o2, ln2, port, nxt))
                    nxt += 1
                    inflight += 1
                o, ln = chunks[tag]
                _land(span, dst_offset + o, data, ln, staging)
                del data
    finally:
        recv.close()
        staging.close()


def _land(span: Span, at: int, data, ln: int, staging: _Staging) -> None:
    if ln == 0:
        return
    addr, pin = _addr_of(data)
    try:
        if not span.on_gpu:
            ctypes.memmove(span.addr + at, addr, ln)
        else:
            from monarch_cy import gpu
            ctypes.memmove(staging.buf.ptr, addr, ln)
            gpu.copy(_dev(span), staging.buf, ln, dst_offset=at)
    finally:
        pin.release()


def _dev(span: Span):
    from monarch_cy import gpu
    return gpu.DeviceMemory(span.addr, span.nbytes, span.device, owner=span.keep)


def write(h, span: Span, src_offset: int, offset: int, n: int, deadline: float) -> None:
    """Copy ``n`` bytes of ``span`` at ``src_offset`` to the remote buffer at ``offset``."""
    from monarch_cy.actor import Channel
    from monarch_cy._rdma_buffer._owner import host_view
    chunks = [(o, min(CHUNK, n - o)) for o in range(0, n, CHUNK)]
    port, recv = Channel.open()
    staging = _Staging(span, min(CHUNK, n))

    def payload(o, ln):
        if not span.on_gpu:
            return pickle.PickleBuffer(host_view(span.addr + src_offset + o, ln))
        from monarch_cy import gpu
        gpu.copy(staging.buf, _dev(span), ln, src_offset=src_offset + o)
        out = bytearray(ln)        # fresh: the transport may send it without copying
        ctypes.memmove((ctypes.c_char * ln).from_buffer(out), staging.buf.ptr, ln)
        return pickle.PickleBuffer(out)

    try:
        with _watch.watching(h, recv):
            nxt = inflight = 0
            while nxt < len(chunks) or inflight:
                while nxt < len(chunks) and inflight < WINDOW:
                    o, ln = chunks[nxt]
                    h.service.send(("write", h.buf_id, h.token, offset + o, payload(o, ln),
                                    port, nxt))
                    nxt += 1
                    inflight += 1
                wait_answer(recv, deadline, "rdma write (tcp)")
                inflight -= 1
    finally:
        recv.close()
        staging.close()
