"""Ports and relays: where the replies a node receives go, and what they must do.

A *port* is a number on one node; a reply (``REPLY``, ``REPLY_BATCH``,
``REPLY_PARTIAL``) names the port it is for.  Two tables map port numbers to their
receivers, both read and written only by the node's pumping thread except where a
method says it is thread-safe:

* **collectors** (:class:`Collector`): the caller's side of a call; a reply is
  decoded, then delivered; the port is dropped once the collector says it is done;
* **relays** (:class:`Relay`): a cast-tree forwarder's side; the reply stays
  encoded and the relay passes it on up (the actor model's tree, ``_actor.cast``).

The protocols are declared here, beside the node that calls them; the actor model
implements them.  Port numbers start at a random offset per node, so a reply meant
for an earlier incarnation of the same address never hits a port of this one.
"""

from __future__ import annotations

import os
from itertools import count
from typing import Any, Protocol, Sequence

__all__ = ["Collector", "BaseCollector", "Relay", "PortTable"]


class Collector(Protocol):
    """A call's receiver of replies (the actor model's ports, ``_actor.model.ports``).

    Every method runs in the pumping thread and returns quickly.  ``True`` from a
    ``deliver*`` or ``proc_failed`` means the collector is done: the node drops its
    port.  ``actor`` and ``rank`` name who answers, for errors made on the way.
    """

    actor: str
    rank: Any

    def deliver(self, rank: Any, ok: bool, value: Any) -> bool:
        """One decoded reply: a value (``ok``) or an exception."""

    def deliver_batch(self, items: Sequence[tuple]) -> tuple[int, bool]:
        """A batch of ``(rank, ok, pickled value)``: take what can be taken at once;
        ``(how many were taken, done)``; the node delivers the rest one by one."""

    def deliver_partial(self, ranks: Sequence[Any], value: Any) -> bool:
        """A forwarder's fold of the replies of ``ranks`` (``REPLY_PARTIAL``)."""

    def proc_failed(self, proc_key: str, cause: str) -> bool:
        """The proc ``proc_key`` failed: fail what still waits on it."""


class BaseCollector:
    """The defaults of :class:`Collector`, for collectors that need no more: no batch
    taken at once, no folds from below, not waiting on any proc; ``streaming``: the
    collector does something with each reply as it comes (a cast tree's forwarders
    then pass replies up as they arrive, else once per subtree)."""

    __slots__ = ()
    actor = ""
    rank = None
    streaming = True

    def deliver_batch(self, items) -> tuple[int, bool]:
        return 0, False

    def deliver_partial(self, ranks, value) -> bool:
        raise TypeError(f"{type(self).__name__} takes no folded replies (REPLY_PARTIAL "
                        f"for ranks {list(ranks)!r})")

    def proc_failed(self, proc_key: str, cause: str) -> bool:
        return False


class Relay(Protocol):
    """A forwarder's receiver of its subtree's replies, still encoded."""

    def take(self, rank: Any, ok: bool, data, extras) -> None:
        """One reply (``REPLY``)."""

    def take_batch(self, items: Sequence[tuple]) -> None:
        """A batch from below (``REPLY_BATCH``): ``(rank, ok, pickled value)``."""

    def take_partial(self, ranks: Sequence[Any], data, extras) -> None:
        """A fold from below (``REPLY_PARTIAL``)."""


class PortTable:
    """The node's collectors and relays (mixed into :class:`.node.Node`)."""

    def _init_ports(self) -> None:
        self._ports: dict = {}
        self._relays: dict = {}
        # A random start: a reply meant for a previous incarnation of this proc's
        # address (a respawn keeps addresses) cannot hit a port of this one.
        self._port_ids = count(int.from_bytes(os.urandom(5), "little") << 8 | 1)

    def register_port(self, collector: Collector) -> int:
        """A fresh port for ``collector``; its number.  Thread-safe."""
        pid = next(self._port_ids)
        self._ports[pid] = collector
        return pid

    def drop_port(self, port_id: int) -> None:
        """Forget the port (later replies to it are dropped).  Idempotent;
        thread-safe."""
        self._ports.pop(port_id, None)

    def port(self, port_id: int):
        """The collector of ``port_id``, or None once it is done or dropped."""
        return self._ports.get(port_id)

    def open_relay(self, relay: Relay) -> int:
        """A fresh port whose replies go, encoded, to ``relay``; its number."""
        pid = next(self._port_ids)
        self._relays[pid] = relay
        return pid

    def relay(self, port_id: int):
        """The relay of ``port_id``, or None once it is closed."""
        return self._relays.get(port_id)

    def close_relay(self, port_id: int) -> None:
        """Forget the relay of ``port_id``.  Idempotent."""
        self._relays.pop(port_id, None)

    def port_ids(self) -> frozenset:
        """The ports open now (diagnostics, tests: nothing left behind)."""
        return frozenset(self._ports)

    def relay_count(self) -> int:
        """How many relays are open (diagnostics, tests)."""
        return len(self._relays)
