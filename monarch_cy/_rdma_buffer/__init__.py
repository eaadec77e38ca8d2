"""Private implementation of :mod:`monarch_cy.rdma` (one concept per module).

=================== ==============================================================
``_buffer``         RDMABuffer: registration, handle pickling, read/write/drop
``_action``         RDMAAction: batches
``_availability``   get_rdma_backend, is_rdma_available, is_ibverbs_available
``_engine``         transfers run on a thread pool; the runtime's Future
``_select``         backend per pair, the override
``_samehost``       local, cma and ipc backends
``_cma``            process_vm_readv / process_vm_writev
``_tcp``            chunked parallel fallback over the actor transport
``_verbs_backend``  ibverbs (monarch_cy._verbs)
``_owner``          per-process registry and service thread(s)
``_leases``         liveness cells and leases: drop waits for copies in flight
``_watch``          owner death (supervision events, pid reuse)
``_identity``       host id, pid namespace, job fingerprint
``_local``          user memory -> byte span; contiguity and freed-memory checks
``_handle``         the picklable record
``_errors``         the errors
=================== ==============================================================
"""
