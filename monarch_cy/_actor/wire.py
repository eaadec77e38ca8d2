"""Serialization: pickle protocol 5 with out-of-band buffers.

``dumps`` returns the pickle stream plus the list of large buffers (numpy arrays,
torch CPU tensors, bytearrays, anything exposing ``PickleBuffer``) that were kept out
of it.  The node sends each buffer either as its own zero-copy zmq frame or, between
procs of one host, through a shared-memory segment (:mod:`.shm`).

Torch CPU tensors are reduced to a raw byte buffer + dtype + shape (instead of
torch's in-band storage pickling) by a private dispatch table: this touches torch only
when torch is already imported by the sender, and never changes how torch objects
pickle elsewhere.  The receiving side imports torch only when a tensor arrives.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import sys

__all__ = ["dumps", "loads", "INBAND_LIMIT"]

INBAND_LIMIT = 8 * 1024   # buffers smaller than this stay inside the pickle stream
_table = None
_torch_seen = False


def _rebuild_tensor(buf, dtype_name: str, shape, requires_grad: bool):
    import torch
    dtype = getattr(torch, dtype_name)
    if len(memoryview(buf)) == 0:
        t = torch.empty(shape, dtype=dtype)
    else:
        t = torch.frombuffer(buf, dtype=torch.uint8).view(dtype).reshape(shape)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _reduce_tensor(t):
    if t.device.type != "cpu" or t.layout.__repr__() != "torch.strided" or \
            t.is_quantized or t.is_nested:
        return t.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    import torch
    flat = t.detach().contiguous().reshape(-1)
    if flat.numel():
        raw = flat.view(torch.uint8).numpy()
    else:
        raw = bytearray()
    return (_rebuild_tensor, (pickle.PickleBuffer(raw), str(t.dtype).split(".")[1],
                              tuple(t.shape), bool(t.requires_grad)))


def _dispatch_table():
    global _table, _torch_seen
    torch = sys.modules.get("torch")
    if torch is not None and not _torch_seen and hasattr(torch, "Tensor"):
        table = dict(copyreg.dispatch_table)
        table[torch.Tensor] = _reduce_tensor
        try:
            table[torch.nn.Parameter] = _reduce_tensor
        except AttributeError:
            pass
        _table = table
        _torch_seen = True
    return _table


def dumps(obj) -> tuple:
    """Pickle ``obj``; return ``(stream_bytes, [large raw memoryviews])``.

    Raises ``TypeError`` naming the object when it cannot be pickled.
    """
    bufs = []

    def cb(pb, bufs=bufs):
        raw = pb.raw()
        if raw.nbytes < INBAND_LIMIT:
            return True
        bufs.append(raw)
        return False

    table = _dispatch_table()
    try:
        if table is None:
            data = pickle.dumps(obj, 5, buffer_callback=cb)
        else:
            f = io.BytesIO()
            p = pickle.Pickler(f, 5, buffer_callback=cb)
            p.dispatch_table = table
            p.dump(obj)
            data = f.getvalue()
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise TypeError(f"cannot pickle {_short(obj)} to send it: {e}") from e
    return data, bufs


def loads(data, buffers=()):
    return pickle.loads(data, buffers=buffers)


def _short(obj) -> str:
    r = repr(obj)
    return r if len(r) < 200 else r[:200] + "..."
