"""Checking and describing the buffers handed to collective operations.

A buffer is a contiguous torch tensor, or (NCCL only) ``monarch_cy.gpu``
device memory with an explicit ``dtype``.  :func:`describe` turns either into
``(ptr, count, dtype_code, device_index)`` after the checks every backend
shares; each failure is a ``TypeError``/``ValueError`` naming the parameter.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["DTYPE_CODES", "Buffer", "torch_dtype", "describe", "check_gather_sizes"]

# torch dtype name -> the code NCCL and RCCL share (ncclDataType_t).
DTYPE_CODES = {
    "int8": 0,
    "uint8": 1,
    "int32": 2,
    "uint32": 3,
    "int64": 4,
    "uint64": 5,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
    "float8_e4m3fn": 10,
    "float8_e5m2": 11,
}
_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "int": "int32", "long": "int64"}


class Buffer(NamedTuple):
    obj: Any            # what the caller passed (kept alive by the operation)
    ptr: int
    count: int          # elements
    dtype: str          # torch dtype name ("float32")
    code: int           # ncclDataType_t
    itemsize: int
    device: int | None  # CUDA/ROCm ordinal, None for host memory


def torch_dtype(dtype: Any) -> str:
    """A dtype name (``"float32"``) from a torch dtype or a name."""
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    name = _ALIASES.get(name, name)
    if name not in DTYPE_CODES:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_CODES)}, got {dtype!r}")
    return name


def describe(buf: Any, param: str, *, dtype: Any = None, allowed: frozenset[str] | None = None) -> Buffer:
    """Check ``buf`` and describe it.  ``allowed`` restricts the dtypes (gloo's)."""
    import torch

    if isinstance(buf, torch.Tensor):
        if dtype is not None:
            raise TypeError(f"dtype is only for monarch_cy.gpu memory; {param} is a tensor of {buf.dtype}")
        if buf.dtype == torch.bool or buf.is_complex() or str(buf.dtype) not in {f"torch.{k}" for k in DTYPE_CODES}:
            raise ValueError(f"{param} has dtype {buf.dtype}, which collectives do not support")
        if not buf.is_contiguous():
            raise ValueError(
                f"{param} must be contiguous (shape {tuple(buf.shape)}, stride {buf.stride()}); "
                "call .contiguous() first"
            )
        if buf.is_sparse or buf.layout != torch.strided:
            raise ValueError(f"{param} must be a dense (strided) tensor, got layout {buf.layout}")
        name = torch_dtype(buf.dtype)
        if buf.device.type == "cpu":
            device = None
        elif buf.device.type == "cuda":
            device = buf.device.index
        else:
            raise ValueError(f"{param} is on {buf.device}; collectives take cpu or cuda tensors")
        out = Buffer(buf, buf.data_ptr(), buf.numel(), name, DTYPE_CODES[name], buf.element_size(), device)
    else:
        from monarch_cy.gpu import DeviceMemory

        if not isinstance(buf, DeviceMemory):
            raise TypeError(
                f"{param} must be a torch.Tensor or monarch_cy.gpu device memory, got {type(buf).__name__}"
            )
        if dtype is None:
            raise TypeError(f"{param} is monarch_cy.gpu memory: pass dtype= to say what it holds")
        name = torch_dtype(dtype)
        itemsize = _ITEMSIZE[name]
        if buf.nbytes % itemsize:
            raise ValueError(f"{param} holds {buf.nbytes} bytes, not a whole number of {name} ({itemsize} bytes)")
        out = Buffer(buf, buf.ptr, buf.nbytes // itemsize, name, DTYPE_CODES[name], itemsize, buf.device.ordinal)
    if allowed is not None and out.dtype not in allowed:
        raise ValueError(f"{param} has dtype {out.dtype}, which this backend does not support (supported: {sorted(allowed)})")
    return out


_ITEMSIZE = {
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "float16": 2,
    "float32": 4, "float64": 8, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
}


def check_gather_sizes(opname: str, big: Buffer, small: Buffer, size: int, big_name: str, small_name: str) -> None:
    """``big`` must hold exactly ``size`` times ``small``'s elements, of the same dtype."""
    if big.dtype != small.dtype:
        raise ValueError(f"{opname}: {big_name} has dtype {big.dtype} but {small_name} has {small.dtype}")
    if big.device != small.device:
        raise ValueError(f"{opname}: {big_name} and {small_name} are on different devices")
    if big.count != size * small.count:
        raise ValueError(
            f"{opname}: {big_name} must hold group size ({size}) x {small_name} elements "
            f"= {size * small.count}, got {big.count}"
        )
