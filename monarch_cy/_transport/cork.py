"""Bursts: messages a thread sends while it works through calls already queued for
it leave together, in as few records as the transport allows.

An actor thread that finds more calls waiting after handling one *corks* its node
(:meth:`Cork.begin` via ``Node.cork``) and handles the queued calls; their replies
(and anything else the thread sends meanwhile) are held in order and sent when the
burst ends: when no call is waiting any more, after :data:`MAX_BURST` calls, or before
the thread blocks waiting for a reply of its own (``Node.wait``).  So a caller that
pipelines many calls gets their replies in a few records, while a lone call is never
delayed (its reply is sent at once, uncorked).

A reply may still wait behind a slow call handled later in the same burst; the node's
pump thread bounds that: :data:`MAX_DELAY` after the first message was held it sends
what is held (it needs the GIL, so at worst one interpreter switch interval later).

Order: everything one thread sends to one destination stays in order (per-sender
FIFO), corked or not: held messages go out under the cork's lock, before any later
send from that thread.
"""

from __future__ import annotations

import threading

__all__ = ["Cork", "MAX_BURST", "MAX_DELAY"]

MAX_BURST = 256          # calls handled in one corked burst at most
MAX_DELAY = 0.0005       # seconds a held message waits at most for its burst to end


class Cork:
    """Messages held for one thread of one node (see the module docstring)."""

    __slots__ = ("node", "lock", "held", "armed")

    def __init__(self, node) -> None:
        self.node = node
        self.lock = threading.Lock()
        self.held = []            # (addr, frames), in send order
        self.armed = False        # a pump timer will flush

    def add(self, addr: str, frames) -> None:
        with self.lock:
            self.held.append((addr, frames))
            if self.armed:
                return
            self.armed = True
        self.node.add_timer(MAX_DELAY, self.flush)

    def flush(self) -> None:
        """Send what is held, grouped per destination (order within each kept).
        Thread-safe; sends happen under the lock so two flushes never interleave."""
        with self.lock:
            self.armed = False
            held, self.held = self.held, []
            if not held:
                return
            by_addr = {}
            for addr, frames in held:
                by_addr.setdefault(addr, []).append(frames)
            for addr, msgs in by_addr.items():
                self.node.send_many(addr, msgs)
