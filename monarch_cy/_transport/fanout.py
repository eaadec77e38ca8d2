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
Replies: with mode ``NONE`` each actor answers the reply address of the header
itself.  With ``WHOLE`` or ``PER_TURN`` the forwarders gather them: each one writes
its own fan-out address into the header it delivers (the sender marks where the
pickled reply address lies, :func:`call_template`), the actors answer it in a raw
form the C thread reads (:func:`pack_reply`; :meth:`.node.Node.reply` does it for
any reply address :func:`gathers`), and the gathered replies go up to the forwarder
above or, at a head, to the sender as the ``REPLY_BATCH``/``REPLY`` messages a
Python relay would send (``_fanout_gather.pxi``).

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

__all__ = ["SUFFIX", "addr_of", "gathers", "FanoutInbox", "pack_route", "call_template",
           "pack_message", "pack_reply", "pack_pass", "NONE", "WHOLE", "PER_TURN"]

SUFFIX = "~fan"
_MAGIC, _VERSION = 0xFA, 2
_REPLY, _PASS = 0xFB, 0xFD
_NO_PATCH = 0xFFFF
#: What the forwarders do with the replies: nothing (each actor answers the sender);
#: gather a subtree's and send them up once all came (an error at once); send up what
#: came in each turn of the forwarder's loop.
NONE, WHOLE, PER_TURN = 0, 1, 2
_HEAD = struct.Struct("<BBHHIBBHHQH")
_UP = struct.Struct("<BBIQ")
_MARKERS = (0x7ABCDEF1, 0x6B5A4C3D, 0x5F1E2D3C, 0x4A3B2C1D)   # ints pickled as BININT
_SUN_PATH = 107


def addr_of(proc_addr: str) -> str:
    """The fan-out inbox address of the proc whose node listens at ``proc_addr``."""
    return proc_addr + SUFFIX


def gathers(addr: str) -> bool:
    """Whether ``addr`` is a fan-out inbox: a reply to it is a forwarder's to gather
    (sent as :func:`pack_reply` makes it)."""
    return addr.endswith(SUFFIX)


def usable(addr: str) -> bool:
    """Whether ``addr`` (a proc's or an actor's) can take part in a fan-out."""
    return addr.startswith(SCHEME)


def pack_route(here, children) -> bytes:
    """A proc's route: ``here``: ``[(rank in the call, actor address)]`` it delivers
    to; ``children``: ``[(proc address, route)]`` it passes the message on to (their
    fan-out inboxes).  It starts with the number of replies the subtree owes (these
    targets and the children's).  Raises ``ValueError`` for a non-``unix://``
    address."""
    owed = len(here) + sum(struct.unpack_from("<I", r)[0] for _, r in children)
    out = [struct.pack("<II", owed, len(here))]
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
    """``(template, patch offset, reply span)``: the first frame of
    ``protocol.pack_call`` less its payload, with a 4-byte slot for the rank at
    ``patch offset``; ``reply span``: ``(offset, length)`` of the pickled reply
    address (opcode, length, text) a gathering forwarder replaces with its own, or
    None where it is not where pickle puts it (the forwarders then do not gather)."""
    if reply_addr is reply_key or reply_addr is method:
        # Its own object: pickle would write the other as a reference to it, which
        # the forwarder's replacement would change too.
        reply_addr = reply_addr.encode().decode()
    for marker in _MARKERS:
        h = pickle.dumps((method, reply_addr, port_id, marker, reply_key, extent), 5)
        if len(h) > MAX_HEADER:
            raise ValueError(f"message header too large ({len(h)} bytes; at most "
                             f"{MAX_HEADER})")
        slot = b"J" + struct.pack("<i", marker)
        at = h.find(slot)
        if at >= 0 and h.find(slot, at + 1) < 0:
            return (len(h).to_bytes(2, "little") + h, 2 + at + 1,
                    _span(h, method, reply_addr))
    raise ValueError("call_template: no rank marker is unique in this header")


def _span(h: bytes, method: str, reply_addr: str):
    """Where pickle protocol 5 put the reply address in ``h``: after PROTO, FRAME,
    MARK and the method (SHORT_BINUNICODE or BINUNICODE, then MEMOIZE); checked."""
    text = reply_addr.encode()
    if len(text) > 255:
        return None
    m = len(method.encode())
    at = 12 + (2 + m if m < 256 else 5 + m) + 1
    op = b"\x8c" + bytes((len(text),)) + text          # SHORT_BINUNICODE
    if h[at:at + len(op)] != op:
        return None
    return 2 + at, len(op)


def pack_message(template: bytes, offset: int, route: bytes, data=b"", mode: int = NONE,
                 port: int = 0, up: str = "", span=None) -> bytes:
    """The first frame of a fan-out message (layout: :mod:`._fanout`).  With ``mode``
    ``WHOLE`` or ``PER_TURN`` the first forwarder sends what it gathered to ``up`` (a
    ``unix://`` address: the sender's reply address) for call ``port``; ``span`` is
    :func:`call_template`'s (None: no gathering, whatever ``mode`` says)."""
    if mode not in (NONE, WHOLE, PER_TURN):
        raise ValueError(f"pack_message: mode={mode!r} is not NONE, WHOLE or PER_TURN")
    if mode == NONE or span is None or not usable(up):
        mode, port, upb, span = NONE, 0, b"", (0, 0)
    else:
        upb = path_of(up).encode()
    return b"".join((_HEAD.pack(_MAGIC, _VERSION, len(template), offset, len(route),
                                mode, 0, span[0], span[1], port, len(upb)),
                     upb, template, route, data))


def pack_reply(port_id: int, rank: int, ok: bool) -> bytes:
    """The header of a reply to a gathering forwarder (the value follows it)."""
    return _UP.pack(_REPLY, 1 if ok else 0, rank, port_id)


def pack_pass(port_id: int, f0: bytes) -> bytes:
    """A node message for the caller of call ``port_id`` (an ``UNDELIVERABLE``),
    sent to a gathering forwarder: passed up in order with the replies."""
    return _UP.pack(_PASS, 0, 0, port_id) + f0


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

