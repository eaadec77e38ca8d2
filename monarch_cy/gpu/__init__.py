"""Owning GPU objects over the runtime shim (re-exports only).

Importing this module loads no GPU library; the runtime is bound on the first
object made (see :mod:`monarch_cy._runtime` for the search order).  The
implementation lives in :mod:`monarch_cy._gpu` (its docstring lists the modules);
every class and function here has ``monarch_cy.gpu`` as its ``__module__``.

``UnprovenRuntimeWarning``: the runtime bound is a release the shim's ABI tables are
not proven against in CI (it binds anyway; docs/gpu.md, "Supported runtimes").
"""

from monarch_cy._errors import UnprovenRuntimeWarning
from monarch_cy._gpu import (
    Device,
    DeviceBuffer,
    DeviceMemory,
    DeviceProperties,
    Event,
    HostMemory,
    HostRegistration,
    IpcHandle,
    IpcMapping,
    Memory,
    PinnedBuffer,
    Stream,
    copy,
    device_count,
    wrap_torch,
)

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
