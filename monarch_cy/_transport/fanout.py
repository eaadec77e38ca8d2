"""Fan-out: one message, passed on by procs without their GIL to procs and actors below.

A *fan-out message* carries a call for many actors and a *route*: which actor inboxes
the receiving proc delivers the call to (and each one's rank in the call), and which
procs it passes the message on to next (each with its own route).  Every worker proc
that may forward binds a *fan-out inbox* beside its node's inbox, at its address plus
``"f"`` (:func:`addr_of`), read by a C thread that never takes the GIL
(:mod:`._fanout`, whose docstring has the byte layout and the failure rules): a proc
whose actor holds the GIL, in C code or a long Python loop, still passes every
message on at once.  Senders use the node's ordinary :meth:`~.node.Node.send` to a
fan-out address; the inbox authenticates them like any ``unix://`` inbox.

What travels: the call header is pickled once, by the first sender, with a marker int
where each actor's rank goes (:func:`call_template`); the forwarder writes each rank
there as 4 bytes, so an actor receives a first frame that unpacks to the header
``protocol.pack_call`` would have made (the rank pickled as a 4-byte int), then the
payload and the extra frames.
Replies do not pass through the forwarders: each actor answers the reply address of
the header itself.

Only ``unix://`` (one host): a fan-out address exists only for ``unix://`` procs.
"""

from __future__ import annotations

import os
import pickle
import socket
import struct

from monarch_cy import _config
from monarch_cy._transport.protocol import MAX_HEADER
from monarch_cy._transport.unix_records import (SCHEME, link_incarnation, new_incarnation,
                                              path_of, unlink_quietly)

__all__ = ["SUFFIX", "addr_of", "FanoutInbox", "pack_route", "call_template",
           "pack_message"]

SUFFIX = "f"
_MAGIC, _VERSION = 0xFA, 1
_NO_PATCH = 0xFFFF
_MARKERS = (0x7ABCDEF1, 0x6B5A4C3D, 0x5F1E2D3C, 0x4A3B2C1D)   # ints pickled as BININT
_SUN_PATH = 107


def addr_of(proc_addr: str) -> str:
    """The fan-out inbox address of the proc whose node listens at ``proc_addr``."""
    return proc_addr + SUFFIX


def usable(addr: str) -> bool:
    """Whether ``addr`` (a proc's or an actor's) can take part in a fan-out."""
    return addr.startswith(SCHEME)


def pack_route(here, children) -> bytes:
    """A proc's route: ``here``: ``[(rank in the call, actor address)]`` it delivers
    to; ``children``: ``[(proc address, route)]`` it passes the message on to (their
    fan-out inboxes).  Raises ``ValueError`` for a non-``unix://`` address."""
    out = [struct.pack("<I", len(here))]
    for local, addr in here:
        p = path_of(addr).encode()
        out.append(struct.pack("<IH", local, len(p)))
        out.append(p)
    out.append(struct.pack("<I", len(children)))
    for proc, route in children:
        p = path_of(addr_of(proc)).encode()
        out.append(struct.pack("<H", len(p)))
        out.append(p)
        out.append(struct.pack("<I", len(route)))
        out.append(route)
    return b"".join(out)


def call_template(method: str, reply_addr: str, port_id: int, reply_key, extent) -> tuple:
    """``(template, patch offset)``: the first frame of ``protocol.pack_call`` less its
    payload, with a 4-byte slot for the rank at ``patch offset``."""
    for marker in _MARKERS:
        h = pickle.dumps((method, reply_addr, port_id, marker, reply_key, extent), 5)
        if len(h) > MAX_HEADER:
            raise ValueError(f"message header too large ({len(h)} bytes; at most "
                             f"{MAX_HEADER})")
        slot = b"J" + struct.pack("<i", marker)
        at = h.find(slot)
        if at >= 0 and h.find(slot, at + 1) < 0:
            return len(h).to_bytes(2, "little") + h, 2 + at + 1
    raise ValueError("call_template: no rank marker is unique in this header")


def pack_message(template: bytes, offset: int, route: bytes, data=b"") -> bytes:
    """The first frame of a fan-out message (layout: :mod:`._fanout`)."""
    return b"".join((struct.pack("<BBHHI", _MAGIC, _VERSION, len(template), offset,
                                 len(route)), template, route, data))


class FanoutInbox:
    """A proc's fan-out inbox: a seqpacket socket bound at ``path_of(addr)``'s
    incarnation (as :class:`.unix_inbox.Inbox` binds) and the C thread that reads it
    (:class:`._fanout.Forwarder`), started here.  :meth:`close` stops the thread,
    closes the socket and removes its files (unless a newer incarnation owns the
    link).  Owned by the node (:meth:`.node.Node.open_fanout`)."""

    def __init__(self, addr: str, secret: bytes) -> None:
        from monarch_cy._transport._fanout import Forwarder  # deferred: built module
        self.addr = addr
        self.path = path_of(addr)
        self.incarnation = new_incarnation(self.path)
        self.target = os.path.join(os.path.dirname(self.path), self.incarnation)
        if len(os.fsencode(self.target)) > _SUN_PATH:
            raise ValueError(f"{addr!r} is too long for a fan-out inbox")
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            ls.setblocking(False)
            ls.bind(self.target)
            ls.listen(4096)
            link_incarnation(self.path, self.target, self.incarnation)
            self._fwd = Forwarder(ls.fileno(), self.path.encode(),
                                  self.incarnation.encode(), secret,
                                  float(_config.auth_timeout()))
        except BaseException:
            ls.close()
            unlink_quietly(self.target)
            raise
        self._ls = ls
        self.closed = False

    def stats(self) -> dict:
        """The forwarder's counters (:meth:`._fanout.Forwarder.stats`)."""
        return self._fwd.stats()

    def close(self, linger_s: float = 0.0) -> None:
        """Stop forwarding (what is queued is sent for up to ``linger_s`` seconds, the
        rest dropped), remove the files.  Idempotent."""
        if self.closed:
            return
        self.closed = True
        self._fwd.close(linger_s)
        self._ls.close()
        unlink_quietly(self.target)
        try:
            if os.readlink(self.path) == self.incarnation:
                os.unlink(self.path)
        except OSError:
            pass

