"""The transport: authenticated, ordered messages between the processes of one job.

It knows processes, addresses, frames and bytes; it knows nothing of actors,
meshes or supervision (the actor model, :mod:`monarch_cy._actor`, sits on top: it
makes the node, registers handlers for its message kinds, and passes in how a
remote failure is represented).  Nothing here imports the actor model.

Modules, from the bottom up:

* :mod:`.protocol` — every message kind, the one frame-header pack/unpack (with
  its size check), the pending marker reply waiters test.  Imports only pickle.
* :mod:`.wire` — serialization: cloudpickle (by value for ``__main__``, locals,
  lambdas), protocol-5 out-of-band buffers, torch tensors' own reduction with CPU
  storages out of band.
* :mod:`.secret` — the job secret: made, passed to procs, read by host agents.
* :mod:`.user_secret` — this user's secret: what workers and a controller share when no
  job secret is set; it also signs custom job caches.
* :mod:`.auth` — the job secret's keys (CurveZMQ, ZAP) and the proof a same-host
  peer gives before anything it sends is unpickled.
* :mod:`.unix_records` — addresses and their incarnations, and framing of records
  on AF_UNIX seqpacket sockets (one, many, spilled to a memfd, proofs, batches).
* :mod:`.alarm` — a one-shot timer as a file descriptor (deadlines in a poll set).
* :mod:`.unix_inbox`, :mod:`.unix_outlet` — the receiving and the sending side of
  a same-host connection; :mod:`.unixsock` — the ``unix://`` scheme over both.
* :mod:`.fanout` — fan-out inboxes: a proc passes a call on to the procs and actors
  its route names from a C thread that never takes the GIL (:mod:`._fanout`), so a
  busy interpreter holds back no one below it.
* :mod:`.shm` — large buffers between processes of one host through shared memory
  segments, with the receiver's release.
* :mod:`.cork` — holding replies of a burst so they leave together.
* :mod:`.senders` — one ordered outgoing connection per destination (zmq PUSH or
  unix outlet), used from any thread.
* :mod:`.ports` — the tables of collectors and relays replies go to, and the
  protocols (`Collector`, `Relay`) the actor model implements for them.
* :mod:`.pump` — who reads which inbox, and how a blocked caller pumps its own
  replies (no thread hop); timers, fd and pid watches.
* :mod:`.node` — the per-process node that ties them together: inboxes, ports,
  replies, releases, proc-death bookkeeping.
* :mod:`.current` — this process's node: ``set_node``, ``current_node``,
  ``node_or_make`` (imports only threading).
"""
