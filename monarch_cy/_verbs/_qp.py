"""Reliable-connected queue pairs and one-sided RDMA READ / WRITE.

A :class:`QueuePair` owns its completion queue.  Connecting takes one exchange
of :class:`~monarch_cy._verbs.QPEndpoint` records over any channel (the actor
transport; a pipe in tests): each side sends ``qp.endpoint`` and calls
``qp.connect(peer_endpoint)``.

:meth:`QueuePair.read` / :meth:`QueuePair.write` move lists of
``(local_addr, lkey, remote_addr, rkey, length)`` and block (GIL released)
until every request has completed, at most ``timeout`` seconds.  Requests
longer than the port's message limit are split; at most ``max_send_wr``
requests are in flight (more are posted as half of them complete).  Local ranges are checked against
the protection domain's live regions before anything is posted (``ValueError``
for unregistered memory).  ``check`` (optional) is called every
``check_interval`` seconds while completions are awaited; whatever it raises
abandons the wait, so a peer's death noticed elsewhere ends a wait the device
may keep retrying for a long time (soft-RoCE had not given up a minute after
its peer was killed).  A failed completion raises ``VerbsError`` with its
``ibv_wc_status`` name (``IBV_WC_REM_ACCESS_ERR`` for a bad rkey or a remote
range outside the peer's region); after one, the queue pair is in the error
state and good only for ``close()`` (connect a new one).

Not thread-safe: one thread drives one queue pair (use one per thread).
"""

from __future__ import annotations

import random
import time
from typing import Callable, Iterable, Sequence

from monarch_cy import _rdma
from monarch_cy._errors import VerbsTimeout
from monarch_cy._verbs._memory import ProtectionDomain
from monarch_cy._verbs._records import QPEndpoint
from monarch_cy._resource import Owned

__all__ = ["QueuePair", "split_ops"]

Op = tuple[int, int, int, int, int]


def split_ops(ops: Iterable[Op], max_length: int) -> list[Op]:
    """``ops`` with every request longer than ``max_length`` cut into consecutive pieces."""
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length!r}")
    out: list[Op] = []
    for i, op in enumerate(ops):
        if not isinstance(op, tuple) or len(op) != 5:
            raise TypeError(
                f"ops[{i}] must be a tuple (local_addr, lkey, remote_addr, rkey, length), got {op!r}")
        la, lkey, ra, rkey, n = op
        if isinstance(n, int) and n > max_length:
            for off in range(0, n, max_length):
                out.append((la + off, lkey, ra + off, rkey, min(max_length, n - off)))
        else:
            out.append(op)
    return out


def _release_qp(qp: int, cq: int) -> None:
    try:
        _rdma.destroy_qp(qp)
    finally:
        _rdma.destroy_cq(cq)


class QueuePair(Owned):
    """A reliable-connected queue pair in ``pd``, with its own completion queue."""

    __slots__ = ("pd", "qp_num", "max_send_wr", "psn", "connected", "_qp", "_cq", "_max_msg")

    def __init__(self, pd: ProtectionDomain, max_send_wr: int = 128) -> None:
        super().__init__()
        if not isinstance(pd, ProtectionDomain):
            raise TypeError(f"pd must be a ProtectionDomain, got {type(pd).__name__}")
        ctx = pd.context
        max_send_wr = min(max_send_wr, ctx.device_attr["max_qp_wr"] or max_send_wr)
        cq = _rdma.create_cq(ctx.handle, max_send_wr + 1)
        try:
            qp, qp_num = _rdma.create_rc_qp(pd.handle, cq, max_send_wr)
        except BaseException:
            _rdma.destroy_cq(cq)
            raise
        self._own(_release_qp, qp, cq)
        self.pd = pd
        self._qp, self._cq = qp, cq
        self.qp_num = qp_num
        self.max_send_wr = max_send_wr
        self.psn = random.getrandbits(24)
        self.connected = False
        self._max_msg = min(ctx.port_attr["max_msg_sz"] or _rdma.MAX_WR_LENGTH, _rdma.MAX_WR_LENGTH)
        pd._adopt(self)

    @property
    def endpoint(self) -> QPEndpoint:
        """What the peer needs to connect to this queue pair."""
        self._check_open()
        ctx = self.pd.context
        return QPEndpoint(self.qp_num, ctx.port_attr["lid"], ctx.gid, self.psn,
                          ctx.port_attr["active_mtu"] or 1024, ctx.rd_atomic)

    def connect(self, peer: QPEndpoint) -> None:
        """Connect to ``peer`` (INIT -> RTR -> RTS); call once, after the exchange."""
        self._check_open()
        if not isinstance(peer, QPEndpoint):
            raise TypeError(f"peer must be a QPEndpoint, got {type(peer).__name__}")
        if self.connected:
            raise ValueError("queue pair is already connected; make a new one for another peer")
        ctx = self.pd.context
        _rdma.connect_rc_qp(
            self._qp, port=ctx.port, gid_index=ctx.gid_index,
            mtu=min(peer.mtu, ctx.port_attr["active_mtu"] or 1024), local_psn=self.psn,
            remote_qp_num=peer.qp_num, remote_lid=peer.lid, remote_gid=peer.gid,
            remote_psn=peer.psn, max_rd_atomic=max(1, min(ctx.rd_atomic, peer.rd_atomic)))
        self.connected = True

    def batch(self, opcode: int, ops: Sequence[Op], wr_id_base: int = 0) -> _rdma.WorkBatch:
        """A checked, reusable batch for :meth:`submit` (long requests already split)."""
        self._check_open()
        return _rdma.WorkBatch(opcode, split_ops(ops, self._max_msg), self.pd._regions, wr_id_base)

    def submit(self, batch: _rdma.WorkBatch, timeout: float = 30.0, *,
               check: Callable[[], None] | None = None, check_interval: float = 0.1) -> None:
        """Post ``batch`` and wait for all of it (GIL released while waiting).

        Keeps up to ``max_send_wr`` requests in flight: whenever half of them
        have completed, the next ones are posted.  ``timeout`` bounds the whole
        batch.  On an error completion the queue pair is dead (see the module
        docstring) and ``VerbsError`` propagates.

        ``check``: called with no arguments about every ``check_interval``
        seconds while no completion arrives; an exception it raises propagates
        at once, leaving requests outstanding -- the queue pair is then good only
        for ``close()``.
        """
        self._check_open()
        if not self.connected:
            raise ValueError("queue pair is not connected: call connect(peer_endpoint) first")
        if check is not None and not callable(check):
            raise TypeError(f"check must be callable or None, got {check!r}")
        if not check_interval > 0:
            raise ValueError(f"check_interval must be > 0 seconds, got {check_interval!r}")
        deadline = time.monotonic() + timeout
        total, depth = len(batch), self.max_send_wr
        step = max(1, depth // 2)
        posted = done = 0
        while done < total:
            room = depth - (posted - done)
            if posted < total and room > 0:
                n = min(room, total - posted)
                _rdma.post(self._qp, batch, posted, n)
                posted += n
            k = min(posted - done, step)
            if check is None:
                _rdma.wait(self._cq, k, max(0.0, deadline - time.monotonic()))
            else:
                self._wait_checked(k, deadline, check, check_interval)
            done += k

    def _wait_checked(self, k: int, deadline: float, check: Callable[[], None],
                      interval: float) -> None:
        """``k`` completions by ``deadline``, calling ``check`` between slices of
        ``interval`` seconds.  One completion per wait: a wait that times out has
        consumed none, so nothing is lost between slices."""
        while k:
            left = deadline - time.monotonic()
            try:
                _rdma.wait(self._cq, 1, max(0.0, min(interval, left)))
            except VerbsTimeout:
                if interval < left:
                    check()
                    continue
                raise
            k -= 1

    def read(self, ops: Sequence[Op], timeout: float = 30.0, **kw) -> None:
        """RDMA READ: copy each remote range into its local range; block until done.
        Keyword arguments (``check``, ``check_interval``) go to :meth:`submit`."""
        self.submit(self.batch(_rdma.OP_READ, ops), timeout, **kw)

    def write(self, ops: Sequence[Op], timeout: float = 30.0, **kw) -> None:
        """RDMA WRITE: copy each local range into its remote range; block until done.
        Keyword arguments (``check``, ``check_interval``) go to :meth:`submit`."""
        self.submit(self.batch(_rdma.OP_WRITE, ops), timeout, **kw)

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("connected" if self.connected else "not connected")
        return f"<QueuePair {self.qp_num:#x} {state}>"
