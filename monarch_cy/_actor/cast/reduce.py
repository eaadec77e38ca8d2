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
and must not block.  An exception in either, or a fold that cannot be sent, fails
the call with that exception as an :class:`~monarch_cy.actor.ActorError`.  The order
of folding is not the arrival order at the controller: ``merge`` must be
associative and commutative and ``identity`` must be its identity.
"""

from __future__ import annotations

import pickle

from monarch_cy._transport.protocol import REPLY, REPLY_PARTIAL, buf, pack

__all__ = ["reduce_spec", "by_value", "ReduceRelay"]


def reduce_spec(identity, combine, merge) -> bytes:
    """``(identity, combine, merge)`` pickled by value for the forwarders; a
    ``TypeError`` naming ``merge=`` when they cannot be."""
    return by_value((identity, combine, merge))


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


def _in_shm(extras) -> bool:
    return bool(extras) and any(d is not None for d in pickle.loads(buf(extras[0]))[1])


class ReduceRelay:
    """A forwarder's fold of one call's replies from its subtree (module docstring).
    Lives in the node's relay table until every rank below has answered."""

    __slots__ = ("node", "addr", "port", "key", "left", "pid", "method", "acc",
                 "combine", "merge", "ranks", "broken")

    def __init__(self, node, addr, port, key, left, method, spec) -> None:
        """Unpickles the fold (raising what that raises, with nothing opened), then
        opens its relay port on ``node`` (``pid``)."""
        self.acc, self.combine, self.merge = pickle.loads(spec)
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
        if not ok or _in_shm(extras):
            self.broken = not ok
            self.node.send(self.addr, [pack((REPLY, self.port, rank, ok), data),
                                       *[buf(f) for f in extras]])
            return
        try:
            self.acc = self.combine(self.acc, self.node.decode(data, extras))
            self.ranks.append(rank)
        except Exception as e:  # noqa: BLE001 - the call fails with it
            self._fail(rank, e)

    def take_partial(self, ranks, data, extras) -> None:
        """The fold of a forwarder below."""
        self.left -= len(ranks)
        if not self.broken:
            if _in_shm(extras):
                self.node.send(self.addr, [pack((REPLY_PARTIAL, self.port, ranks), data),
                                           *[buf(f) for f in extras]])
            else:
                try:
                    self.acc = self.merge(self.acc, self.node.decode(data, extras))
                    self.ranks.extend(ranks)
                except Exception as e:  # noqa: BLE001
                    self._fail(ranks[0], e)
        self._check()

    def _fail(self, rank, e) -> None:
        import traceback  # deferred: import time (traceback costs ~4 ms; folds rarely fail)
        self.broken = True
        err = self.node.remote_error(
            e, f"folding replies of {self.method} on the way back failed: "
               f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e)),
            self.method, rank)
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
            self._fail(self.ranks[0], e)
            return
        self.node.send(self.addr, [pack((REPLY_PARTIAL, self.port, self.ranks), data),
                                   *extras])

