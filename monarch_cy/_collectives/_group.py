"""The ``Group`` protocol: what every backend (NCCL/RCCL on GPUs, gloo on CPUs) offers.

Semantics shared by all backends (each backend documents only what differs):

* Every rank of a group calls the same operations in the same order with
  tensors of the same dtype and element count (the root's arguments agree
  too).  A mismatch is a programming error that most backends cannot detect
  cheaply; ``Group(..., check=True)`` exchanges (op, dtype, count, root)
  before every operation and raises ``ValueError`` naming the ranks that
  disagree, at the cost of one extra small all-gather per operation.
* Buffers are contiguous torch tensors on the group's device (``cpu`` for
  gloo, ``cuda:N`` for NCCL); NCCL also takes ``monarch_cy.gpu`` device memory
  with an explicit ``dtype``.  Operations work in place except ``all_gather``
  and ``reduce_scatter``, which write ``output`` from ``input``.
* ``async_op=False`` (default): the call returns once the operation is
  complete as seen from the host (gloo) or from the stream it ran on (NCCL:
  the host waits for the stream, see ``NcclCommunicator``).  ``async_op=True``:
  the call returns a :class:`Work` at once; the caller keeps the buffers alive
  and untouched until ``Work.wait()`` returns.
* Waiting is bounded: an operation not complete within the group's
  ``timeout`` raises :class:`CollectiveTimeout`, and a peer that died raises
  :class:`CollectiveError`; either way the group is then aborted and every
  later call raises :class:`GroupAbortedError`.
* Lifetime (:class:`monarch_cy._resource.Abortable`): ``close()`` releases
  the group after pending work (idempotent); ``abort()`` releases it at once,
  cancelling pending work (idempotent, callable from another thread, nothing
  to do after ``close()``).  Using a closed group raises
  ``ResourceClosedError``, an aborted one :class:`GroupAbortedError` (a
  ``ResourceClosedError``).  A group dropped without either is released by
  its finalizer as ``abort()`` releases it (quietly; never in a forked child,
  never at interpreter shutdown).  A child of ``split()`` keeps its parent
  alive; closing the parent does not close it.
"""

from __future__ import annotations

import enum
import operator
from typing import Any

from monarch_cy._errors import GroupAbortedError
from monarch_cy._resource import Abortable

__all__ = ["ReduceOp", "Work", "Group", "as_reduce_op", "check_rank"]


class ReduceOp(str, enum.Enum):
    """Reduction operations; plain strings (``"sum"``) are accepted too."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PROD = "prod"


def as_reduce_op(op: Any) -> ReduceOp:
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str):
        try:
            return ReduceOp(op.lower())
        except ValueError:
            pass
    raise ValueError(f"op must be one of {[o.value for o in ReduceOp]}, got {op!r}")


def check_rank(value: Any, size: int, param: str) -> int:
    """A rank of a group of ``size``: an int in ``[0, size)``."""
    if isinstance(value, bool):
        raise TypeError(f"{param} must be an int rank, got {value!r}")
    try:
        r = operator.index(value)
    except TypeError:
        raise TypeError(f"{param} must be an int rank, got {value!r}") from None
    if not 0 <= r < size:
        raise ValueError(f"{param} must be a rank in [0, {size}), got {r}")
    return r


class Work:
    """A pending operation.  ``wait()`` blocks until it is complete (bounded by
    ``timeout`` seconds, default the group's), then runs any finishing step
    (the division of a gloo ``avg``); ``is_completed()`` never blocks."""

    def wait(self, timeout: float | None = None) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def is_completed(self) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError


class _DoneWork(Work):
    """A work already complete (a size-1 group, an empty tensor)."""

    def wait(self, timeout: float | None = None) -> None:
        return None

    def is_completed(self) -> bool:
        return True


class Group(Abortable):
    """Base of every backend's group.  Subclasses implement the ``_op`` hooks and
    own their resource through :class:`~monarch_cy._resource.Abortable`.

    Attributes: ``backend`` ("nccl" or "gloo"), ``rank``, ``size``,
    ``timeout`` (seconds), ``closed``, ``aborted`` (the reason, or ``None``).
    """

    backend = "?"
    _aborted_error = GroupAbortedError

    def __init__(self, rank: int, size: int, timeout: float, check: bool = False) -> None:
        Abortable.__init__(self)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"world_size must be an int >= 1, got {size!r}")
        self.rank = check_rank(rank, size, "rank")
        self.size = size
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.timeout = float(timeout)
        self._check_args = bool(check)

    def __exit__(self, *exc: object) -> None:
        # An exception may mean peers are stuck mid-operation: abort, never wait.
        if exc and exc[0] is not None:
            self.abort()
        else:
            self.close()

    def __repr__(self) -> str:
        state = f" aborted ({self._aborted})" if self._aborted else (" closed" if self._closed else "")
        return f"<{type(self).__name__} rank {self.rank} of {self.size}{state}>"

    # -- consistency check (opt-in) -------------------------------------
    def _agree(self, opname: str, *fields: int) -> None:
        """With ``check=True``: all ranks must pass equal ``fields`` for ``opname``."""
        if not self._check_args or self.size == 1:
            return
        rows = self._exchange_ints([_OPCODES[opname], *fields])
        mine = rows[self.rank]
        bad = [r for r, row in enumerate(rows) if row != mine]
        if bad:
            raise ValueError(
                f"{opname}: ranks disagree on (op, dtype, count, root): rank {self.rank} has "
                f"{mine}, ranks {bad} have {[rows[r] for r in bad]}"
            )

    def _exchange_ints(self, values: list[int]) -> list[list[int]]:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the operations (documented on the backends) --------------------
    def all_reduce(self, tensor, op="sum", *, stream=None, async_op=False, dtype=None):
        raise NotImplementedError

    def broadcast(self, tensor, root=0, *, stream=None, async_op=False, dtype=None):
        raise NotImplementedError

    def reduce(self, tensor, root=0, op="sum", *, stream=None, async_op=False, dtype=None):
        raise NotImplementedError

    def all_gather(self, output, input, *, stream=None, async_op=False, dtype=None):
        raise NotImplementedError

    def reduce_scatter(self, output, input, op="sum", *, stream=None, async_op=False, dtype=None):
        raise NotImplementedError

    def send(self, tensor, peer, *, stream=None, async_op=False, dtype=None):
        raise NotImplementedError

    def recv(self, tensor, peer, *, stream=None, async_op=False, dtype=None):
        raise NotImplementedError

    def barrier(self, *, timeout: float | None = None) -> None:
        raise NotImplementedError

    def split(self, color: int | None, key: int | None = None) -> "Group | None":
        raise NotImplementedError


_OPCODES = {
    "all_reduce": 1,
    "broadcast": 2,
    "reduce": 3,
    "all_gather": 4,
    "reduce_scatter": 5,
    "split": 6,
}
