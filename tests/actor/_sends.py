"""What the controller's node sends, for tests that check how many messages a call,
a spawn or a heartbeat tick takes."""

from __future__ import annotations

from monarch_cy._transport.fanout import gathers
from monarch_cy._transport.protocol import unpack

FANOUT = "fanout"     # the kind listed for a message to a proc's nogil forwarder


def count_sends(monkeypatch, node, kinds=None) -> list:
    """From now on, every message ``node`` sends (of one of ``kinds``: message kinds of
    monarch_cy._transport.protocol, or :data:`FANOUT`; None: all) is listed as
    ``(kind, address)``."""
    sent = []
    real = node.send

    def counting(addr, frames):
        f0 = bytes(frames[0][:1])
        kind = FANOUT if f0 == b"\xfa" and gathers(addr) else unpack(frames[0])[0][0]
        if kinds is None or kind in kinds:
            sent.append((kind, addr))
        return real(addr, frames)
    monkeypatch.setattr(node, "send", counting)
    return sent
