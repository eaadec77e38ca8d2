"""Re-exports only: the ``__module__`` of the memory classes and ``copy`` (pickles
name it), which are defined in :mod:`monarch_cy._gpu._memory` and
:mod:`monarch_cy._gpu._copy`.
"""

from monarch_cy._gpu._copy import copy
from monarch_cy._gpu._memory import (
    DeviceBuffer,
    DeviceMemory,
    HostMemory,
    HostRegistration,
    Memory,
    PinnedBuffer,
)

__all__ = [
    "Memory",
    "DeviceMemory",
    "DeviceBuffer",
    "HostMemory",
    "HostRegistration",
    "PinnedBuffer",
    "copy",
]
