"""Owning GPU objects over the runtime shim (re-exports only).

Importing this module loads no GPU library; the runtime is bound on the first
object made (see :mod:`monarch_cy._runtime` for the search order).  The
implementation lives in :mod:`monarch_cy._gpu` (its docstring lists the modules).

``UnprovenRuntimeWarning``: the runtime bound is a release the shim's ABI tables are
not proven against in CI (it binds anyway; docs/gpu.md, "Supported runtimes").
"""

from monarch_cy._errors import UnprovenRuntimeWarning
from monarch_cy._gpu._copy import copy
from monarch_cy._gpu._device import Device, DeviceProperties, device_count
from monarch_cy._gpu._event import Event
from monarch_cy._gpu._ipc import IpcHandle, IpcMapping
from monarch_cy._gpu._memory import (
    DeviceBuffer,
    DeviceMemory,
    HostMemory,
    HostRegistration,
    Memory,
    PinnedBuffer,
)
from monarch_cy._gpu._stream import Stream
from monarch_cy._gpu._torch import wrap_torch

__all__ = [
    "UnprovenRuntimeWarning",
    "Device",
    "DeviceProperties",
    "device_count",
    "Stream",
    "Event",
    "Memory",
    "DeviceMemory",
    "DeviceBuffer",
    "HostMemory",
    "HostRegistration",
    "PinnedBuffer",
    "IpcHandle",
    "IpcMapping",
    "copy",
    "wrap_torch",
]
