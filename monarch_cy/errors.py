"""Public exception tree (re-exports only; see :mod:`monarch_cy._errors`)."""

from monarch_cy._errors import (
    GpuRuntimeError,
    GpuRuntimeUnavailable,
    MonarchCyError,
    NoDeviceError,
    OutOfMemoryError,
    ResourceClosedError,
    VerbsError,
    VerbsTimeout,
    VerbsUnavailable,
)

__all__ = [
    "MonarchCyError",
    "GpuRuntimeError",
    "OutOfMemoryError",
    "NoDeviceError",
    "GpuRuntimeUnavailable",
    "ResourceClosedError",
    "VerbsError",
    "VerbsUnavailable",
    "VerbsTimeout",
]
