"""Private implementation of :mod:`monarch_cy.collectives` (one concept per module).

* :mod:`._group` — the ``Group`` protocol every backend offers, and its lifetime
  (``close``/``abort``, :class:`monarch_cy._resource.Abortable`).
* :mod:`._nccl_comm` — ``NcclCommunicator``: the protocol on GPUs (NCCL or RCCL).
* :mod:`._gloo` — ``GlooGroup``: the protocol on CPUs, over torch.distributed gloo.
* :mod:`._nccl_loader` — finding, opening and binding NCCL/RCCL (the search is
  :mod:`monarch_cy._loader`'s).
* :mod:`._rendezvous` — how a new group's ranks find each other.
* :mod:`._buffers` — checking and describing the buffers given to an operation.
* :mod:`._factory` — ``make_group``: one call per rank, whatever the backend.
* :mod:`._mesh` — groups over proc meshes, set up from the controller.
* :mod:`._torch_env` — Monarch's pattern: torch.distributed's environment per proc.
* :mod:`._errors` — the layer's errors (NCCL's own live in :mod:`monarch_cy._errors`).
"""
