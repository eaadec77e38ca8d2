"""Copies between any two memories: ours, torch tensors, numpy arrays, any buffer.

Without ``stream``, :func:`copy` blocks until the bytes have arrived; with one it
returns at once and the caller must keep both sides alive and unchanged until the
stream reaches it.
"""

from __future__ import annotations

from typing import Any

from monarch_cy._gpu._device import shim
from monarch_cy._gpu._memory import HostMemory, Memory, _nbytes
from monarch_cy._gpu._stream import Stream, stream_handle
from monarch_cy._gpu._torch import wrap_torch


def as_memory(obj: Any, writable: bool) -> Memory:
    """A memory object for ``obj``: passes ours through, wraps tensors and buffers."""
    if isinstance(obj, Memory):
        obj._check_open()
        return obj
    if type(obj).__module__.startswith("torch"):
        return wrap_torch(obj)
    try:
        return HostMemory(obj, writable=writable)
    except TypeError:
        raise TypeError(
            f"expected a monarch_cy.gpu memory object, a torch tensor or a buffer, got {type(obj).__name__}"
        ) from None


def copy(
    dst: Any,
    src: Any,
    nbytes: int | None = None,
    *,
    dst_offset: int = 0,
    src_offset: int = 0,
    stream: Stream | None = None,
) -> None:
    """Copy ``nbytes`` (default: all of ``src`` past ``src_offset``) from ``src`` to ``dst``.

    Either side may be device or host memory, ours, a torch tensor, or a
    buffer.  Blocking without ``stream``; enqueued on ``stream`` otherwise.
    Out-of-range spans raise ``ValueError`` before anything is copied.
    """
    d = as_memory(dst, writable=True)
    s = as_memory(src, writable=False)
    if getattr(d, "readonly", False):
        raise ValueError("dst is read-only memory")
    dst_offset = _nbytes(dst_offset, "dst_offset")
    src_offset = _nbytes(src_offset, "src_offset")
    n = s.nbytes - src_offset if nbytes is None else _nbytes(nbytes)
    if src_offset + n > s.nbytes:
        raise ValueError(f"src holds {s.nbytes} bytes; cannot read {n} from offset {src_offset}")
    if dst_offset + n > d.nbytes:
        raise ValueError(f"dst holds {d.nbytes} bytes; cannot write {n} at offset {dst_offset}")
    if n == 0:
        return
    rt = shim()
    if stream is None:
        rt.memcpy(d.ptr + dst_offset, s.ptr + src_offset, n, rt.MEMCPY_DEFAULT)
    else:
        rt.memcpyAsync(d.ptr + dst_offset, s.ptr + src_offset, n, rt.MEMCPY_DEFAULT, stream_handle(stream))

