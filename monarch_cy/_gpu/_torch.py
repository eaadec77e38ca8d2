"""Interop with torch, without copies, in both directions.

* :func:`wrap_torch` borrows a contiguous tensor's memory (CUDA/ROCm or CPU);
  the tensor stays alive as long as the wrapper is open.
* ``DeviceMemory.to_torch()`` and ``PinnedBuffer.numpy()`` go the other way
  (through ``__cuda_array_interface__`` and the buffer protocol).
* ``Stream.from_torch`` / ``Stream.to_torch`` do the same for streams.

torch is imported only by these calls, never by ``import monarch_cy.gpu``.
"""

from __future__ import annotations

from typing import Any

from monarch_cy._gpu._memory import DeviceMemory, HostMemory


def wrap_torch(tensor: Any):
    """Borrow ``tensor``'s memory: ``DeviceMemory`` for GPU tensors, ``HostMemory``
    for CPU ones.  The tensor must be contiguous (else ``ValueError``)."""
    import torch  # import time: torch is imported only by the interop calls

    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}")
    if not tensor.is_contiguous():
        raise ValueError("tensor must be contiguous to be wrapped without a copy")
    nbytes = tensor.numel() * tensor.element_size()
    if tensor.device.type == "cuda":
        return DeviceMemory(tensor.data_ptr(), nbytes, tensor.device.index, owner=tensor)
    if tensor.device.type == "cpu":
        return HostMemory.from_address(tensor.data_ptr(), nbytes, owner=tensor)
    raise ValueError(f"tensor is on {tensor.device}; only cuda and cpu tensors can be wrapped")

