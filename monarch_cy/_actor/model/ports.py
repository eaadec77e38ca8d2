"""Ports: where replies go.  Collectors for the adverbs, and user channels.

A *port* is ``(node address, port id)`` plus an optional rank tag.  Every call
registers a collector on the caller's node under a fresh port id; replies for that
id are delivered to it by the pumping thread, in arrival order.  Collectors:

* :class:`OneCollector` -- one reply resolves a Future (``call_one``, ``choose``);
* :class:`GatherCollector` -- n replies make a ValueMesh (``call``); the first error
  fails the whole call (an actor's failure once the other ranks have answered, or
  :data:`FAILED_GRACE_S` later);
* :class:`StreamCollector` -- n futures resolved in arrival order (``stream``);
* :class:`AccumCollector` -- folds replies as they arrive (``Accumulator``);
  :class:`ReduceCollector` also joins folds made on the way back (``merge=``);
* :class:`PortReceiver` -- user channel (``Channel.open()``), unbounded FIFO.

Each implements the transport's :class:`~monarch_cy._transport.ports.Collector`
protocol (the node delivers to it); ``proc_failed(proc_key, cause)`` fails a collector
still waiting on that proc and returns True when the collector is finished (with
``failed_rank=``, its ``SupervisionError`` names that rank as the failed one: a
cast-tree forwarder that died with the call, :class:`~.cast.router.Tracked`).  ``streaming``: whether the collector
does something with each reply as it comes (a cast tree's forwarders then pass replies
up as they arrive; otherwise once per subtree, :mod:`monarch_cy._actor.cast.tree`).
"""

from __future__ import annotations

import pickle
import threading
from collections import deque
from typing import Generic, TypeVar

from monarch_cy._errors import MeshStoppedError, SupervisionError
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.base.value_mesh import ValueMesh
from monarch_cy._actor.cast.reduce import fold_error, merge_how
from monarch_cy._transport.ports import BaseCollector

__all__ = ["Port", "PortReceiver", "Channel", "OneCollector", "ChooseCollector",
           "GatherCollector",
           "StreamCollector", "AccumCollector", "ReduceCollector"]

R = TypeVar("R")


def _err(value, call=None):
    """A reply's error as the exception to raise; a SupervisionError names the call
    that met it (Monarch's ``Endpoint call <mesh>.<endpoint>() failed, ...``)."""
    if not isinstance(value, BaseException):
        return RuntimeError(repr(value))
    if call is not None and value.__class__ in _NAMED and value.endpoint is None:
        value.endpoint = call
    return value


_NAMED = {SupervisionError, MeshStoppedError}


def _failed(actor, rank, cause, call, who, failed_rank=None) -> SupervisionError:
    """A proc's death as the call's error; ``who(rank)`` names the actor (Monarch's
    ``<root>.<module.Class mesh{point}>``) where the caller knows its class.  With
    ``failed_rank`` (the proc that died was a cast-tree forwarder above ``rank``:
    ``failed_rank`` is the one to respawn) the error carries ``failed_rank`` and the
    plain ``mesh[failed_rank]`` name: the forwarder may lie outside the caller's
    slice, where ``who`` cannot name it.  Never raises (it runs in the pump)."""
    if failed_rank is not None:
        return SupervisionError(actor, failed_rank, cause, call)
    try:
        name = who(rank) if who else None
    except Exception:  # noqa: BLE001 - a plain name rather than a lost failure
        name = None
    return SupervisionError(actor, rank, cause, call, name)


def _endpoint_of(call) -> str:
    """The endpoint's name in a collector's ``call`` (``"<mesh>.<endpoint>()"``)."""
    return "" if not call else call.rsplit(".", 1)[-1].removesuffix("()")


class OneCollector(BaseCollector):
    __slots__ = ("fut", "proc", "actor", "rank", "call", "who")
    adverb = "call_one"       # how the call was made, in Monarch's failure texts

    def __init__(self, fut, proc, actor, rank, call=None, who=None):
        self.fut, self.proc, self.actor, self.rank = fut, proc, actor, rank
        self.call = call          # "<mesh>.<endpoint>()": errors name it
        self.who = who            # rank -> the actor's name in failure texts

    def deliver(self, rank, ok, value) -> bool:
        if ok:
            self.fut._set_result(value)
        else:
            self.fut._set_exception(_err(value, self.call))
        return True

    def proc_failed(self, proc, cause, failed_rank=None) -> bool:
        if proc != self.proc:
            return False
        self.fut._set_exception(_failed(self.actor, self.rank, cause, self.call,
                                        self.who, failed_rank))
        return True


class ChooseCollector(OneCollector):
    """``choose``'s: one actor's reply, as ``call_one``'s."""
    __slots__ = ()
    adverb = "choose"


#: Seconds a ``call`` whose first error is an actor's failure waits for the other
#: ranks before it raises it: actors that fail together (a failing broadcast, a bad
#: input) have then all reached their owner's ``__supervise__`` when the caller sees
#: the failure.  Only the failure path waits, and only while ranks are unanswered.
FAILED_GRACE_S = 0.25


class GatherCollector(BaseCollector):
    __slots__ = ("fut", "shape", "values", "left", "procs", "actor", "got", "call", "who",
                 "failed", "lock")
    adverb = "call"
    streaming = False          # nothing is resolved before the last reply

    def __init__(self, fut, shape, procs, actor, call=None, who=None):
        self.fut, self.shape, self.procs, self.actor = fut, shape, procs, actor
        self.call, self.who = call, who
        n = len(procs)
        self.values = [None] * n
        self.got = [False] * n
        self.left = n
        self.failed = None         # an actor's failure, raised once the grace ends

    def deliver(self, rank, ok, value) -> bool:
        if self.failed is not None:               # within FAILED_GRACE_S
            if not self.got[rank]:
                self.got[rank] = True
                self.left -= 1
            if self.left == 0:
                self._fail(self.failed)
                return True
            return False
        if not ok:
            err = _err(value, self.call)
            if type(err) is SupervisionError and self.left > 1 and not self.got[rank]:
                self.got[rank] = True
                self.left -= 1
                self.failed = err
                self.lock = threading.Lock()
                _state.get_node().add_timer(FAILED_GRACE_S, lambda: self._fail(err))
                return False
            self.fut._set_exception(err)
            return True
        if not self.got[rank]:
            self.got[rank] = True
            self.values[rank] = value
            self.left -= 1
        if self.left == 0:
            self.fut._set_result(ValueMesh(self.shape, self.values))
            return True
        return False

    def deliver_batch(self, items) -> tuple[int, bool]:
        """A cast tree's batch of ``(rank, ok, pickled value)``: takes the leading
        replies that are results and unpickle here, and returns ``(how many it took,
        done)``; the caller hands the rest to :meth:`deliver` one by one (an error,
        or a value that does not unpickle, fails the call there)."""
        if self.failed is not None:
            return 0, False         # within the failure's grace: deliver() counts them
        got, values, loads = self.got, self.values, pickle.loads
        took = left = 0
        for rank, ok, data in items:
            if not ok:
                break
            try:
                value = loads(data)
            except Exception:  # noqa: BLE001 - deliver() turns it into the call's error
                break
            took += 1
            if not got[rank]:
                got[rank] = True
                values[rank] = value
                left += 1
        self.left -= left
        if self.left == 0:
            self.fut._set_result(ValueMesh(self.shape, self.values))
            return took, True
        return took, False

    def _fail(self, exc) -> None:
        """End the grace: raise ``exc`` (once; the timer and a delivering thread may
        both get here)."""
        with self.lock:
            self.fut._set_exception(exc)

    def proc_failed(self, proc, cause, failed_rank=None) -> bool:
        for r, p in enumerate(self.procs):
            if p == proc and not self.got[r]:
                exc = _failed(self.actor, r, cause, self.call, self.who, failed_rank)
                if self.failed is not None:
                    self._fail(self.failed)
                else:
                    self.fut._set_exception(exc)
                return True
        return False


class StreamCollector(BaseCollector):
    __slots__ = ("futs", "next", "procs", "actor", "got", "call", "who")
    adverb = "stream"
    streaming = True

    def __init__(self, futs, procs, actor, call=None, who=None):
        self.futs, self.procs, self.actor = futs, procs, actor
        self.call, self.who = call, who
        self.next = 0
        self.got = [False] * len(procs)

    def deliver(self, rank, ok, value) -> bool:
        self.got[rank] = True
        f = self.futs[self.next]
        self.next += 1
        if ok:
            f._set_result(value)
        else:
            f._set_exception(_err(value, self.call))
        return self.next == len(self.futs)

    def proc_failed(self, proc, cause, failed_rank=None) -> bool:
        for r, p in enumerate(self.procs):
            if p == proc and not self.got[r]:
                self.got[r] = True
                f = self.futs[self.next]
                self.next += 1
                f._set_exception(_failed(self.actor, r, cause, self.call, self.who,
                                         failed_rank))
        return self.next == len(self.futs)


class AccumCollector(GatherCollector):
    __slots__ = ("acc", "combine")

    def __init__(self, fut, shape, procs, actor, identity, combine, call=None):
        super().__init__(fut, shape, procs, actor, call)
        self.acc, self.combine = identity, combine

    def deliver_batch(self, items) -> tuple[int, bool]:
        return 0, False            # folds: each reply through deliver()

    def deliver(self, rank, ok, value) -> bool:
        if not ok:
            self.fut._set_exception(_err(value, self.call))
            return True
        if self.got[rank]:
            return False
        self.got[rank] = True
        self.left -= 1
        return self._fold(self.combine, value, rank,
                          f"combine raised on the reply of rank {rank}")

    def _fold(self, fn, value, rank, how) -> bool:
        """``acc = fn(acc, value)``; True (the future resolved) when it raised or was
        the last.  Whatever it raises (a ``BaseException`` too) fails this call alone,
        as :func:`~monarch_cy._actor.cast.reduce.fold_error` words it: never the
        pump that delivers, nor the calls it delivers to next."""
        try:
            self.acc = fn(self.acc, value)
        except BaseException as e:  # noqa: BLE001 - this call's error, nobody else's
            self.fut._set_exception(fold_error(e, self.actor, _endpoint_of(self.call),
                                               rank, how))
            return True
        if self.left == 0:
            self.fut._set_result(self.acc)
            return True
        return False


class ReduceCollector(AccumCollector):
    """``Accumulator(..., merge=)``: replies are folded with ``combine`` as they arrive;
    a cast-tree forwarder's fold of its subtree (``deliver_partial``) joins with
    ``merge``."""

    __slots__ = ("merge",)

    def __init__(self, fut, shape, procs, actor, identity, combine, merge, call=None):
        super().__init__(fut, shape, procs, actor, identity, combine, call)
        self.merge = merge

    def deliver_partial(self, ranks, value) -> bool:
        got = self.got
        for r in ranks:
            if got[r]:                 # never counted twice (a bug, not an input)
                self.fut._set_exception(RuntimeError(
                    f"rank {r} of {self.actor} was folded twice on the way back"))
                return True
            got[r] = True
        self.left -= len(ranks)
        return self._fold(self.merge, value, min(ranks), merge_how(ranks))


class Port(Generic[R]):
    """A picklable handle that sends values to one port, from any process of the job.

    ``send(value)`` is fire-and-forget and thread-safe; values from one sender arrive
    in the order sent.  ``exception(exc)`` delivers an error instead.

    ``return_undeliverable`` (Monarch's flag, default True; settable, kept when the
    port is pickled): whether a message that cannot be delivered goes back to its
    sender.  monarch_cy never returns one: a send to a port that is closed (its
    receiver closed or gone) is dropped, as Monarch does with ``False``.
    """

    __slots__ = ("_addr", "_port_id", "_rank", "_key", "_return_undeliverable")

    def __init__(self, addr, port_id, rank=None, key=None, return_undeliverable=True):
        self._addr, self._port_id, self._rank, self._key = addr, port_id, rank, key
        self._return_undeliverable = return_undeliverable

    @property
    def return_undeliverable(self) -> bool:
        """Whether an undeliverable message returns to its sender (default True)."""
        return self._return_undeliverable

    @return_undeliverable.setter
    def return_undeliverable(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"return_undeliverable must be True or False, not {value!r}")
        self._return_undeliverable = value

    def send(self, value: R) -> None:
        _state.get_node().reply(self._addr, self._port_id, self._rank, True, value,
                                self._key)

    def exception(self, exc: BaseException) -> None:
        _state.get_node().reply(self._addr, self._port_id, self._rank, False, exc,
                                self._key)

    def __reduce__(self):
        return (_rebuild_port, (_state.job_tag(), self._addr, self._port_id, self._rank,
                                self._key, self._return_undeliverable))

    def __repr__(self):
        return f"Port({self._addr!r}, {self._port_id})"


def _rebuild_port(tag, addr, port_id, rank, key, return_undeliverable=True):
    _state.check_job(tag, "port")
    return Port(addr, port_id, rank, key, return_undeliverable)


class PortReceiver(BaseCollector, Generic[R]):
    """Receiving end of a channel. ``recv()`` returns a Future of the next value, in
    arrival order.  Errors sent with ``Port.exception`` raise from that future.

    ``ranked()`` is a receiver of the same channel whose ``recv()`` gives ``(rank,
    value)``: the rank the sending actor had in the call whose port it answers
    (``None`` for a plain ``Port.send`` of a channel port).  The two share one queue:
    each value goes to whichever ``recv()`` asked first.
    """

    def __init__(self, node, once: bool = False, ranked: bool = False):
        self._node = node
        self._ranked = ranked
        self._items = deque()            # (rank, ok, value) not yet received
        self._waiters = deque()          # (future, ranked) waiting for a value
        self._once = once
        self._lock = threading.Lock()
        self._port_id = node.register_port(self)

    def deliver(self, rank, ok, value) -> bool:
        with self._lock:
            w = self._waiters.popleft() if self._waiters else None
            if w is None:
                self._items.append((rank, ok, value))
        if w is not None:
            _resolve(w[0], w[1], rank, ok, value)
        return self._once

    def proc_failed(self, proc, cause) -> bool:
        return False

    def recv(self) -> "Future[R]":
        f = Future._make(None)       # resolved by the I/O thread (background inbox)
        with self._lock:
            item = self._items.popleft() if self._items else None
            if item is None:
                self._waiters.append((f, self._ranked))
        if item is not None:
            _resolve(f, self._ranked, *item)
        return f

    def ranked(self) -> "PortReceiver[tuple[int, R]]":
        """This channel's receiver giving ``(rank, value)`` (see the class docstring)."""
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)   # the same queue, lock and port
        view._ranked = True
        return view

    def __reduce__(self):
        raise TypeError("a PortReceiver stays in the process that opened its channel; "
                        "send the Port (the sending end) to other actors instead")

    def close(self) -> None:
        """Stop receiving; later sends to the port are dropped."""
        self._node.drop_port(self._port_id)


def _resolve(f, ranked, rank, ok, value) -> None:
    if not ok:
        f._set_exception(_err(value))
    else:
        f._set_result((rank, value) if ranked else value)


class Channel(Generic[R]):
    """``Channel.open()`` -> ``(Port, PortReceiver)``: a user-made reply channel."""

    @staticmethod
    def open(once: bool = False) -> "tuple[Port[R], PortReceiver[R]]":
        """A channel: the Port travels to senders; ``recv()`` here gets the values."""
        node = _state.get_node()
        recv = PortReceiver(node, once)
        return Port(node.addr, recv._port_id, None, node.key), recv

    @staticmethod
    def open_ranked(once: bool = False) -> "tuple[Port[R], PortReceiver[tuple[int, R]]]":
        """As :meth:`open`, but ``recv()`` gives ``(rank, value)``: the rank the
        sending actor had in the call whose port this is (None for a plain send)."""
        port, recv = Channel.open(once)
        return port, recv.ranked()
