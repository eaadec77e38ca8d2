"""``GlooGroup``: the ``Group`` API on CPUs, over torch.distributed's gloo backend.

Each group is its own ``ProcessGroupGloo`` over its own ``TCPStore`` (rank 0
listens at ``master_addr:master_port``, the others connect), made directly
rather than through ``init_process_group``: a process may hold several
independent groups, none touches torch.distributed's global default group,
and ``close()``/``abort()`` tear down exactly one.

Differences from the common semantics (:mod:`monarch_cy._collectives._group`):

* ``stream`` must be ``None`` (CPU work has no stream); ``dtype`` must be
  ``None`` (tensors only).  Supported dtypes: :data:`GLOO_DTYPES`.
* ``avg`` is computed as ``sum`` then a division by ``size`` on each rank
  (truncating for integer dtypes, as NCCL does); ``reduce`` leaves non-root
  tensors unspecified.
* A peer that dies breaks the TCP connections: gloo reports it at once and the
  operation raises ``CollectiveError``; a peer that is alive but stuck is
  caught by the timeout (``CollectiveTimeout``).  Either way the group is
  aborted.
* Lifetime (:class:`monarch_cy._resource.Abortable`): ``close()`` and
  ``abort()`` both call ``ProcessGroupGloo.shutdown()`` (its ``abort()`` can
  break the process's other gloo groups) and drop the process group, whose
  destructor ends gloo's threads and sockets.  A group dropped unclosed gets
  the same from its finalizer.  In a forked child nothing is released and the
  process group is kept alive for good: its destructor would join threads the
  child does not have, and hang.
"""

from __future__ import annotations

import datetime
import threading
from typing import Any, Callable

from monarch_cy._collectives._buffers import Buffer, check_gather_sizes, describe
from monarch_cy._errors import CollectiveError, CollectiveTimeout
from monarch_cy._collectives._group import Group, ReduceOp, Work, as_reduce_op, check_rank

__all__ = ["GlooGroup", "GLOO_DTYPES"]

GLOO_DTYPES = frozenset({"int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"})


def _td(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def _torch_op(op: ReduceOp):
    import torch.distributed as dist

    return {
        ReduceOp.SUM: dist.ReduceOp.SUM,
        ReduceOp.AVG: dist.ReduceOp.SUM,  # divided afterwards
        ReduceOp.MAX: dist.ReduceOp.MAX,
        ReduceOp.MIN: dist.ReduceOp.MIN,
        ReduceOp.PROD: dist.ReduceOp.PRODUCT,
    }[op]


def _shutdown(pg: Any) -> None:
    """What ``close()``, ``abort()`` and the finalizer run (``GlooGroup._own``);
    best effort: the group is gone either way once the last reference drops."""
    try:
        pg.shutdown()
    except Exception:  # noqa: BLE001
        pass


def _divide(tensor, size: int) -> None:
    if tensor.is_floating_point():
        tensor.div_(size)
    else:
        tensor.copy_(tensor.div(size, rounding_mode="trunc"))


class _GlooWork(Work):
    def __init__(self, group: "GlooGroup", op: str, work: Any, finish: Callable[[], None] | None = None):
        self._group = group
        self._op = op
        self._work = work
        self._finish = finish
        self._done = False

    def is_completed(self) -> bool:
        return self._done or bool(self._work.is_completed())

    def wait(self, timeout: float | None = None) -> None:
        if self._done:
            return
        limit = self._group.timeout if timeout is None else float(timeout)
        try:
            self._work.wait(_td(limit))
        except Exception as e:  # noqa: BLE001 - gloo raises RuntimeError subclasses
            raise self._group._broken(self._op, e, limit) from None
        self._done = True
        if self._finish is not None:
            self._finish()


class GlooGroup(Group):
    """A gloo group of ``world_size`` processes; rank 0 hosts the rendezvous store.

    Blocks until every rank has joined (bounded by ``timeout`` seconds, else
    ``CollectiveTimeout``).  Made by every rank with the same ``master_addr``,
    ``master_port`` and ``world_size``.
    """

    backend = "gloo"
    _pin_in_child = True  # dropping a ProcessGroupGloo in a forked child hangs

    def __init__(
        self,
        rank: int,
        world_size: int,
        master_addr: str,
        master_port: int,
        *,
        timeout: float = 300.0,
        check: bool = False,
    ) -> None:
        super().__init__(rank, world_size, timeout, check)
        from monarch_cy._collectives._rendezvous import TcpRendezvous

        TcpRendezvous(master_addr, master_port)  # validates both
        import torch.distributed as dist

        try:
            store = dist.TCPStore(
                master_addr, master_port, world_size, rank == 0,
                timeout=_td(self.timeout), wait_for_workers=False,
            )
        except Exception as e:  # noqa: BLE001
            raise CollectiveError("init", f"rank {rank} could not reach the store at {master_addr}:{master_port}: {e}") from None
        self._init_pg(store, "mcy/gloo/0")

    def _init_pg(self, store: Any, prefix: str) -> None:
        import torch.distributed as dist

        self._store = store
        self._prefix = prefix
        self._splits = 0
        self._lock = threading.Lock()
        try:
            self._pg = dist.ProcessGroupGloo(dist.PrefixStore(prefix, store), self.rank, self.size, _td(self.timeout))
        except Exception as e:  # noqa: BLE001
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            cls = CollectiveTimeout if "imeout" in msg or "timed out" in msg else CollectiveError
            args = ("init", f"rank {self.rank}: {msg}") + ((self.timeout,) if cls is CollectiveTimeout else ())
            raise cls(*args) from None
        self._own(_shutdown, self._pg)

    @classmethod
    def _child(cls, parent: "GlooGroup", rank: int, size: int, prefix: str) -> "GlooGroup":
        self = cls.__new__(cls)
        Group.__init__(self, rank, size, parent.timeout, parent._check_args)
        self._parent = parent  # strong reference up: the store lives in the parent's chain
        self._init_pg(parent._store, prefix)
        return self

    # -- failure handling ------------------------------------------------
    def _broken(self, op: str, error: BaseException, limit: float) -> CollectiveError:
        text = str(error).strip().splitlines()
        msg = text[0] if text else type(error).__name__
        self.abort(reason=f"{op} failed: {msg}")
        if "imeout" in msg or "timed out" in msg:
            return CollectiveTimeout(op, f"not complete within {limit:g} s ({msg}); group aborted", limit)
        return CollectiveError(op, f"{msg}; group aborted")

    def _run(self, op: str, start: Callable[[], Any], async_op: bool, finish=None):
        self._check_open()
        try:
            w = start()
        except (ValueError, TypeError):
            raise
        except Exception as e:  # noqa: BLE001
            raise self._broken(op, e, self.timeout) from None
        work = _GlooWork(self, op, w, finish)
        if async_op:
            return work
        work.wait()
        return None

    def _tensor(self, t: Any, param: str, stream: Any, dtype: Any) -> Buffer:
        self._check_open()
        if stream is not None:
            raise ValueError(f"stream must be None for gloo (CPU work has no stream), got {stream!r}")
        b = describe(t, param, dtype=dtype)
        if b.device is not None:
            raise ValueError(f"{param} is on {t.device}; a gloo group takes cpu tensors")
        if b.dtype not in GLOO_DTYPES:
            raise ValueError(f"{param} has dtype {b.dtype}, which gloo does not support (supported: {sorted(GLOO_DTYPES)})")
        return b

    def _exchange_ints(self, values: list[int]) -> list[list[int]]:
        import torch

        mine = torch.tensor(values, dtype=torch.int64)
        out = torch.empty(self.size * len(values), dtype=torch.int64)
        chunks = list(out.chunk(self.size))
        self._run("check", lambda: self._pg.allgather([chunks], [mine]), False)
        return [c.tolist() for c in chunks]

    # -- operations ------------------------------------------------------
    def all_reduce(self, tensor, op="sum", *, stream=None, async_op=False, dtype=None):
        """Reduce ``tensor`` over all ranks, in place on every rank."""
        import torch.distributed as dist

        b = self._tensor(tensor, "tensor", stream, dtype)
        rop = as_reduce_op(op)
        self._agree("all_reduce", list(ReduceOp).index(rop), b.code, b.count, -1)
        opts = dist.AllreduceOptions()
        opts.reduceOp = _torch_op(rop)
        finish = (lambda: _divide(tensor, self.size)) if rop is ReduceOp.AVG else None
        return self._run("all_reduce", lambda: self._pg.allreduce([tensor], opts), async_op, finish)

    def broadcast(self, tensor, root=0, *, stream=None, async_op=False, dtype=None):
        """Copy ``root``'s ``tensor`` into every rank's ``tensor``."""
        import torch.distributed as dist

        b = self._tensor(tensor, "tensor", stream, dtype)
        root = check_rank(root, self.size, "root")
        self._agree("broadcast", 0, b.code, b.count, root)
        opts = dist.BroadcastOptions()
        opts.rootRank, opts.rootTensor = root, 0
        return self._run("broadcast", lambda: self._pg.broadcast([tensor], opts), async_op)

    def reduce(self, tensor, root=0, op="sum", *, stream=None, async_op=False, dtype=None):
        """Reduce into ``root``'s ``tensor``; other ranks' tensors are left unspecified."""
        import torch.distributed as dist

        b = self._tensor(tensor, "tensor", stream, dtype)
        root = check_rank(root, self.size, "root")
        rop = as_reduce_op(op)
        self._agree("reduce", list(ReduceOp).index(rop), b.code, b.count, root)
        opts = dist.ReduceOptions()
        opts.reduceOp, opts.rootRank, opts.rootTensor = _torch_op(rop), root, 0
        finish = None
        if rop is ReduceOp.AVG and self.rank == root:
            finish = lambda: _divide(tensor, self.size)  # noqa: E731
        return self._run("reduce", lambda: self._pg.reduce([tensor], opts), async_op, finish)

    def all_gather(self, output, input, *, stream=None, async_op=False, dtype=None):
        """Rank ``i``'s ``input`` lands in the ``i``-th of ``size`` equal slices of ``output``."""
        o = self._tensor(output, "output", stream, dtype)
        i = self._tensor(input, "input", stream, dtype)
        check_gather_sizes("all_gather", o, i, self.size, "output", "input")
        self._agree("all_gather", 0, i.code, i.count, -1)
        chunks = list(output.view(-1).chunk(self.size)) if i.count else [output.view(-1)[:0]] * self.size
        return self._run("all_gather", lambda: self._pg.allgather([chunks], [input.view(-1)]), async_op)

    def reduce_scatter(self, output, input, op="sum", *, stream=None, async_op=False, dtype=None):
        """Reduce ``input`` over all ranks; rank ``i`` gets the ``i``-th of ``size`` slices in ``output``.

        Done as an all-reduce of a copy of ``input`` followed by a local copy
        (gloo's own reduce_scatter is not available in every torch build).
        """
        import torch.distributed as dist

        o = self._tensor(output, "output", stream, dtype)
        i = self._tensor(input, "input", stream, dtype)
        check_gather_sizes("reduce_scatter", i, o, self.size, "input", "output")
        rop = as_reduce_op(op)
        self._agree("reduce_scatter", list(ReduceOp).index(rop), o.code, o.count, -1)
        scratch = input.reshape(-1).clone()
        opts = dist.AllreduceOptions()
        opts.reduceOp = _torch_op(rop)

        def finish() -> None:
            mine = scratch.chunk(self.size)[self.rank] if o.count else scratch[:0]
            output.view(-1).copy_(mine)
            if rop is ReduceOp.AVG:
                _divide(output, self.size)

        return self._run("reduce_scatter", lambda: self._pg.allreduce([scratch], opts), async_op, finish)

    def send(self, tensor, peer, *, stream=None, async_op=False, dtype=None):
        """Send ``tensor`` to ``peer``, which must ``recv`` a tensor of the same dtype and size."""
        self._tensor(tensor, "tensor", stream, dtype)
        peer = self._peer(peer)
        return self._run("send", lambda: self._pg.send([tensor], peer, 0), async_op)

    def recv(self, tensor, peer, *, stream=None, async_op=False, dtype=None):
        """Receive into ``tensor`` what ``peer`` sends."""
        self._tensor(tensor, "tensor", stream, dtype)
        peer = self._peer(peer)
        return self._run("recv", lambda: self._pg.recv([tensor], peer, 0), async_op)

    def _peer(self, peer: Any) -> int:
        p = check_rank(peer, self.size, "peer")
        if p == self.rank:
            raise ValueError(f"peer must be another rank than this one ({self.rank})")
        return p

    def barrier(self, *, timeout: float | None = None) -> None:
        """Return once every rank has entered the barrier (bounded by ``timeout``)."""
        import torch.distributed as dist

        self._check_open()
        opts = dist.BarrierOptions()
        try:
            w = self._pg.barrier(opts)
        except Exception as e:  # noqa: BLE001
            raise self._broken("barrier", e, self.timeout) from None
        _GlooWork(self, "barrier", w).wait(timeout)

    def split(self, color: int | None, key: int | None = None) -> "GlooGroup | None":
        """Collective: ranks passing the same ``color`` form a new group, ordered by
        ``(key, rank)`` (``key`` defaults to this rank).  ``color=None`` (or
        negative) joins none and gets ``None``.  Blocks until all ranks called it.
        """
        self._check_open()
        c = -1 if color is None else color
        k = self.rank if key is None else key
        for name, v in (("color", c), ("key", k)):
            if isinstance(v, bool) or not isinstance(v, int) or not -(2**62) < v < 2**62:
                raise TypeError(f"{name} must be an int (or None for color), got {v!r}")
        was, self._check_args = self._check_args, False
        try:
            rows = self._exchange_ints([c, k])
        finally:
            self._check_args = was
        with self._lock:
            seq = self._splits
            self._splits += 1
        if c < 0:
            return None
        members = sorted((kk, r) for r, (cc, kk) in enumerate(rows) if cc == c)
        new_rank = [r for _, r in members].index(self.rank)
        return GlooGroup._child(self, new_rank, len(members), f"{self._prefix}/split{seq}/c{c}")

    # -- teardown (Abortable; see the module doc) ------------------------------
    def close(self) -> None:
        """Release the group (idempotent).  Work already waited for is complete."""
        super().close()
        self._pg = None

    def abort(self, reason: str = "abort() was called") -> None:
        """Cancel pending work and release the group at once (idempotent, any thread)."""
        super().abort(reason)
        self._pg = None
