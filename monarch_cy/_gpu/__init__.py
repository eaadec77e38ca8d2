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
are there whichever module is imported first.  The public classes keep the modules
of :mod:`monarch_cy.gpu` that re-export them (``monarch_cy.gpu._device`` ...) as
their ``__module__``, as before this package existed: pickles name those.
"""

from monarch_cy._gpu import (  # noqa: F401, I001 - in layer order; each registers its classes
    _registry, _device, _stream, _event, _memory, _ipc, _torch, _copy,
)
