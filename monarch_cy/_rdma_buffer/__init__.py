"""Private implementation of :mod:`monarch_cy.rdma` (one concept per module).

The modules in layer order, bottom first: each imports only modules listed above it.
The errors are in :mod:`monarch_cy._errors` (the one home of the exception tree).

=================== ==============================================================
``_handle``         the picklable record
``_identity``       host id, pid namespace, job fingerprint
``_target``         rdma_ibverbs_target: which verbs device; RdmaInitError when malformed
``_local``          user memory -> byte span; contiguity and freed-memory checks
``_cma``            process_vm_readv / process_vm_writev
``_watch``          owner death (supervision events, pid reuse)
``_leases``         liveness cells and leases: drop waits for copies in flight
``_owner_call``     a request to a buffer's owner service and the wait for its answer
``_verbs_backend``  ibverbs (monarch_cy._verbs)
``_owner``          per-process registry and service thread(s)
``_select``         backend per pair, the override
``_availability``   get_rdma_backend, is_rdma_available, is_ibverbs_available
``_samehost``       local, cma and ipc backends
``_tcp``            chunked parallel fallback over the actor transport
``_engine``         transfers run on a thread pool; the runtime's Future
``_buffer``         RDMABuffer: registration, handle pickling, read/write/drop
``_action``         RDMAAction: batches
=================== ==============================================================
"""
