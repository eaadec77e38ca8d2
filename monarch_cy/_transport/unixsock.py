"""Same-host transport: ``unix://`` addresses, AF_UNIX ``SOCK_SEQPACKET`` connections.

Why not zmq here: a zmq message crosses two I/O threads on its way (sender's, then
receiver's), four thread wake-ups per round trip; on a small VM that is most of a
round trip (pyzmq ping-pong ~110 µs against ~25 µs for a Unix socket, same host,
same minutes; bench/RESULTS.md).  A seqpacket record goes straight from the sending
thread into the kernel and out to the thread blocked receiving it.  The kernel keeps
record boundaries and per-connection order, so there is no framing code beyond a
small header; ``tcp://`` (between hosts) stays on zmq.

Authentication: the first record on every connection is a proof,
``HMAC-SHA256(job secret, tag | inbox path | incarnation | nonce)`` with a fresh
16-byte client nonce.  The receiver checks it against its own path and incarnation
and rejects a nonce it has seen, and only then reads further records from that
connection; anything else first, or any malformed record later, drops the connection
unread.  Nothing from a connection is deserialized before its proof.  A connection
that proves nothing within ``MONARCH_CY_AUTH_TIMEOUT`` seconds (default 5) of being
accepted is closed; refusals are logged a few per minute, then counted.

Incarnations, and why not a challenge.  The nonce memory lives in one inbox, so a
respawned proc binding the same path would take a proof captured earlier.  Each
bind therefore draws a fresh incarnation: the socket is bound under
``PATH.TOKEN`` (64 random bits) and the path becomes a symbolic link to it, swapped
atomically on respawn (:mod:`.unix_records`).  The proof names the incarnation, so
an inbox accepts only proofs made for itself, each once; no later incarnation at the
path can ever accept them.  A sender learns the incarnation where it connects:
:class:`Outlet` reads the link at every connect (one ``readlink``) and connects to
the name it gives; a stale name (the peer just respawned) fails to connect and is
retried like a peer not listening yet, and an outlet that lost its peer reconnects
the same way, so it always proves itself to the incarnation it reaches.  The other
design, a server-sent challenge answered by the proof, costs a round trip on every
connection and needs the receiving thread: the outlet connects from whatever thread
sends first and never blocks, so its records would wait in its backlog for the
peer's reader to accept and answer (a ``direct`` inbox is read only while a caller
waits), and be lost if the sender exits meanwhile, where today they are in the
peer's kernel buffer at once.  With the link the proof still travels with the data:
no round trip, connection setup one syscall dearer, per-message cost unchanged.

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
