"""Folding replies on the way back: an ``Accumulator`` with ``merge=`` down a cast tree.

A call cast down a tree (:mod:`.tree`) with a reduction carries the
accumulator's ``(identity, combine, merge)``, pickled by value once per
``Accumulator``.  Each forwarder keeps a :class:`ReduceRelay` for the call: it folds
the replies of the actors it delivered to with ``combine``, starting from its own
copy of ``identity``, and the folds sent up by the forwarders below it with
``merge``.  Once every rank below it has answered it sends one ``REPLY_PARTIAL`` up,
naming the call ranks the value covers.  The controller so receives at most one
message per head and one per leaf it delivers to itself, whatever the mesh's size,
and decodes one value per message instead of one per actor.

What is not folded on the way goes up unchanged, for the controller to fold:

* errors: the call fails with the first one that reaches the controller, and the
  forwarder drops whatever else arrives for the call;
* replies and folds whose buffers travel in shared memory: a segment is released
  by the process it was placed for, which is the controller.

``combine`` and ``merge`` run on the forwarders' I/O threads, so they must be quick
and must not block.  Whatever either raises -- any ``BaseException``, ``SystemExit``
and ``KeyboardInterrupt`` included -- or a fold that cannot be sent, fails that call
alone, with the :class:`~monarch_cy.actor.ActorError` of :func:`fold_error`: it
names the mesh, the endpoint and the rank, and reads the same whether the fold ran
on a forwarder or at the controller (the fold's own frames only).  The proc, the
forwarder's other calls and the caller's other calls go on.  A reply that does not
unpickle on a forwarder goes up unchanged, for the controller to report as it does
any reply it cannot unpickle.  The order of folding is not the arrival order at the
controller: ``merge`` must be associative and commutative and ``identity`` must be
its identity.
"""

from __future__ import annotations

import pickle

from monarch_cy._errors import ActorError
from monarch_cy._transport.protocol import REPLY, REPLY_PARTIAL, buf, pack

__all__ = ["reduce_spec", "by_value", "fold_error", "merge_how", "ReduceRelay"]


def reduce_spec(identity, combine, merge, mesh: str = "") -> bytes:
    """``(identity, combine, merge)`` pickled by value for the forwarders, with the
    name of the actor mesh whose replies they fold (for :func:`fold_error`); a
    ``TypeError`` naming ``merge=`` when they cannot be pickled."""
    return by_value((identity, combine, merge, mesh))


def fold_error(exc: BaseException, mesh: str, endpoint: str, rank, how: str) -> ActorError:
    """The error a call fails with when folding its replies raised ``exc`` (any
    ``BaseException``): an :class:`ActorError` of ``mesh``, ``endpoint`` and ``rank``
    (a call rank) whose traceback starts at the fold's own frame, so that its text is
    the same wherever the fold ran.  ``how`` says what failed, e.g. ``"combine raised
    on the reply of rank 3"``.  ``exception`` is ``exc`` when it can travel (else
    None, as for an endpoint's exception)."""
    import traceback  # deferred: import time (traceback costs ~4 ms; folds rarely fail)
    tb = exc.__traceback__
    if tb is not None and tb.tb_next is not None:
        tb = tb.tb_next              # the frame that called the fold is ours
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except Exception:  # noqa: BLE001 - a broken __str__: name the type at least
        text = f"{type(exc).__qualname__}: <str() failed>\n"
    return ActorError(_travels(exc), f"Accumulator's {how} (folding the replies of "
                                     f"{mesh}.{endpoint}):\n{text}", mesh, rank, endpoint)


def _travels(exc):
    """``exc`` if the transport can carry it, else None."""
    from monarch_cy._transport import wire  # deferred: import time (cloudpickle)
    try:
        wire.loads(*wire.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any failure means it cannot travel
        return None


def merge_how(ranks) -> str:
    """``how`` of :func:`fold_error` for a ``merge`` of the fold of ``ranks``."""
    return (f"merge raised on the fold of {len(ranks)} replies (ranks {min(ranks)} to "
            f"{max(ranks)})")


def by_value(obj) -> bytes:
    """``obj`` pickled by value (cloudpickle), or the ``TypeError`` of
    :func:`reduce_spec`."""
    import cloudpickle  # deferred: import time (only Accumulator(merge=) needs it)
    try:
        return cloudpickle.dumps(obj, protocol=5)
    except Exception as e:  # noqa: BLE001 - any pickling failure means the same thing
        raise TypeError(f"Accumulator(..., merge=) folds on other processes, so its "
                        f"identity, combine and merge must be picklable by value: "
                        f"{type(e).__name__}: {e}") from e


_NOTHING = object()                  # no value decoded


def _in_shm(extras) -> bool:
    return bool(extras) and any(d is not None for d in pickle.loads(buf(extras[0]))[1])


class ReduceRelay:
    """A forwarder's fold of one call's replies from its subtree (module docstring).
    Lives in the node's relay table until every rank below has answered."""

    __slots__ = ("node", "addr", "port", "key", "left", "pid", "method", "mesh", "acc",
                 "combine", "merge", "ranks", "broken")

    def __init__(self, node, addr, port, key, left, method, spec) -> None:
        """Unpickles the fold (raising what that raises, with nothing opened), then
        opens its relay port on ``node`` (``pid``).  ``method``: the endpoint's name."""
        self.acc, self.combine, self.merge, self.mesh = pickle.loads(spec)
        self.node, self.addr, self.port, self.key = node, addr, port, key
        self.left, self.method = left, method
        self.ranks = []
        self.broken = False
        self.pid = node.open_relay(self)

    def take(self, rank, ok, data, extras) -> None:
        """One actor's reply (from this proc or a leaf it delivered to)."""
        self.left -= 1
        self._fold(rank, ok, data, extras)
        self._check()

    def take_batch(self, items) -> None:
        self.left -= len(items)
        for rank, ok, data in items:
            self._fold(rank, ok, data, ())
        self._check()

    def _fold(self, rank, ok, data, extras) -> None:
        if self.broken:
            return
        value = _NOTHING
        if ok and not _in_shm(extras):
            try:
                value = self.node.decode(data, extras)
            except Exception:  # noqa: BLE001 - up unchanged: the controller reports it
                pass
        if value is _NOTHING:         # an error, a reply in shm or one that won't load
            self.broken = not ok
            self.node.send(self.addr, [pack((REPLY, self.port, rank, ok), data),
                                       *[buf(f) for f in extras]])
            return
        try:
            self.acc = self.combine(self.acc, value)
        except BaseException as e:  # noqa: BLE001 - the call fails with it, nothing else
            self._fail(rank, e, f"combine raised on the reply of rank {rank}")
            return
        self.ranks.append(rank)

    def take_partial(self, ranks, data, extras) -> None:
        """The fold of a forwarder below."""
        self.left -= len(ranks)
        if not self.broken:
            value = _NOTHING
            if not _in_shm(extras):
                try:
                    value = self.node.decode(data, extras)
                except Exception:  # noqa: BLE001 - up unchanged, as in _fold
                    pass
            if value is _NOTHING:
                self.node.send(self.addr, [pack((REPLY_PARTIAL, self.port, ranks), data),
                                           *[buf(f) for f in extras]])
            else:
                try:
                    self.acc = self.merge(self.acc, value)
                    self.ranks.extend(ranks)
                except BaseException as e:  # noqa: BLE001 - as in _fold
                    self._fail(min(ranks), e, merge_how(ranks))
        self._check()

    def _fail(self, rank, e, how) -> None:
        self.broken = True
        err = fold_error(e, self.mesh, self.method, rank, how)
        self.node.reply(self.addr, self.port, rank, False, err, self.key)

    def _check(self) -> None:
        if self.left > 0:
            return
        self.node.close_relay(self.pid)
        if self.broken or not self.ranks:
            return
        try:
            data, extras = self.node.encode(self.acc, (self.key,))
        except Exception as e:  # noqa: BLE001 - an unsendable fold fails the call
            self._fail(min(self.ranks), e, f"fold of {len(self.ranks)} replies (ranks "
                       f"{min(self.ranks)} to {max(self.ranks)}) could not be sent up")
            return
        self.node.send(self.addr, [pack((REPLY_PARTIAL, self.port, self.ranks), data),
                                   *extras])

