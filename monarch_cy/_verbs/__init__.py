"""RDMA verbs, owned: devices, protection domains, memory regions, RC queue pairs.

The private tier under ``monarch_cy.rdma``'s ibverbs backend (re-exports only).
Built on :mod:`monarch_cy._rdma` (the flat Cython data path); importing this
package loads no libibverbs -- the first :class:`Context` does.

* :mod:`._device` — verbs devices: discovery and the open device context.
* :mod:`._memory` — protection domains and registered memory.
* :mod:`._qp` — reliable-connected queue pairs, one-sided READ / WRITE.
* :mod:`._records` — the records two processes exchange to set up RDMA.
* :mod:`._errors` — the tier's errors.

Typical use, one side (the other mirrors it)::

    ctx = Context()                       # VerbsUnavailable with the reason if none
    pd = ProtectionDomain(ctx)
    mr = pd.register(numpy_array)         # pinned until mr.close()
    qp = QueuePair(pd)
    send(qp.endpoint.to_bytes() + mr.remote().to_bytes())    # any channel
    peer_ep, peer_mr = ...                                   # from the peer
    qp.connect(peer_ep)
    qp.read([(mr.addr, mr.lkey, peer_mr.addr, peer_mr.rkey, n)])
    ctx.close()                           # closes pd, mr, qp first
"""

from monarch_cy._verbs._device import Context, list_devices, pick_gid_index, unavailable_reason
from monarch_cy._errors import VerbsError, VerbsTimeout, VerbsUnavailable
from monarch_cy._verbs._memory import MemoryRegion, ProtectionDomain, pin_buffer
from monarch_cy._verbs._qp import QueuePair, split_ops
from monarch_cy._verbs._records import QPEndpoint, RemoteRegion

__all__ = [
    "Context",
    "ProtectionDomain",
    "MemoryRegion",
    "QueuePair",
    "QPEndpoint",
    "RemoteRegion",
    "VerbsError",
    "VerbsUnavailable",
    "VerbsTimeout",
    "list_devices",
    "unavailable_reason",
    "pick_gid_index",
    "pin_buffer",
    "split_ops",
]
