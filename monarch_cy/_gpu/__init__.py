"""Private implementation of :mod:`monarch_cy.gpu`: owning objects over the runtime shim.

Importing it loads no GPU library; the runtime is bound on the first object made
(see :mod:`monarch_cy._runtime` for the search order).

The modules in layer order, bottom first: each imports only modules listed above it.

=============  ====================================================================
``_registry``  the classes a lower module makes but may not import (by name)
``_device``    devices: choosing one, properties, scoping what is made on it
``_stream``    streams, owned or borrowed (torch's)
``_event``     events
``_memory``    device buffers, pinned host buffers, borrowed memory
``_ipc``       sharing device memory between processes of one host
``_torch``     interop with torch without copies, both ways
``_copy``      copies between any two memories (ours, tensors, buffers)
=============  ====================================================================

Every module is imported here, so that the classes each registers in ``_registry``
are there whichever module is imported first.

``__all__`` is the public API, which :mod:`monarch_cy.gpu` re-exports; each of its
classes and functions has ``monarch_cy.gpu`` as its ``__module__``, the module users
import it from (pickles and tracebacks name it: an ``IpcHandle`` travels in RDMA
buffer handles).
"""

from monarch_cy._gpu import (  # noqa: F401, I001 - in layer order; each registers its classes
    _registry, _device, _stream, _event, _memory, _ipc, _torch, _copy,
)
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

# The public face of every class and function: the module users import it from.
PUBLIC_HOME = "monarch_cy.gpu"
for _name in __all__:
    globals()[_name].__module__ = PUBLIC_HOME
del _name
