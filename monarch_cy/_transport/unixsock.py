"""Same-host transport: ``unix://`` addresses, AF_UNIX ``SOCK_SEQPACKET`` connections.

Why not zmq here: a zmq message crosses two I/O threads on its way (sender's, then
receiver's), four thread wake-ups per round trip; on a small VM that is most of a
round trip (pyzmq ping-pong ~110 µs against ~25 µs for a Unix socket, same host,
same minutes; bench/RESULTS.md).  A seqpacket record goes straight from the sending
thread into the kernel and out to the thread blocked receiving it.  The kernel keeps
record boundaries and per-connection order, so there is no framing code beyond a
small header; ``tcp://`` (between hosts) stays on zmq.

Authentication: the first record on every connection is a proof,
``HMAC-SHA256(job secret, tag | inbox path | nonce)`` with a fresh 16-byte nonce.  The
receiver checks it against its own path and rejects a nonce it has seen (no replay),
and only then reads further records from that connection; anything else first, or
any malformed record later, drops the connection unread.  Nothing from a connection
is deserialized before its proof.  The proof needs no round trip, so a sender can
queue data right behind it.

Records and the proof's exact bytes: :mod:`.unix_records`.  Messages larger than 60 KiB
travel as a memfd passed with their record; replies of a burst share batch records.

Threads: an :class:`Inbox` is read by one thread at a time (the node's rules, see
:mod:`.pump`).  An :class:`Outlet` is used under its own lock; it never blocks: a
record the kernel cannot take now (the peer is slow, or not yet listening) waits in
the outlet's backlog, in order, until :meth:`Outlet.flush` (the node's pump calls it
when the socket is writable, or on a retry timer).
"""

from monarch_cy._transport.unix_inbox import Inbox
from monarch_cy._transport.unix_outlet import Outlet
from monarch_cy._transport.unix_records import MAX_RECORD, SCHEME, Again, Closed, path_of

__all__ = ["Inbox", "Outlet", "Again", "Closed", "SCHEME", "MAX_RECORD", "path_of"]
