"""The sending end of the ``unix://`` transport: :class:`Outlet` (see :mod:`.unixsock`)."""

from __future__ import annotations

import errno
import os
import socket
import threading
from collections import deque

from monarch_cy._transport._unixio import send_bufs
from monarch_cy._transport.unix_records import (
    _B_ONE, _FAST_TRIES, _RETRY_FAST, _RETRY_SLOW, _SNDBUF, MAX_RECORD, discard, path_of,
    proof_record, record, records, resolve,
)

__all__ = ["Outlet"]

_EAGAIN, _EMSGSIZE = -errno.EAGAIN, -errno.EMSGSIZE


class Outlet:
    """This process's connection to one ``unix://`` inbox; FIFO, never blocking.

    :meth:`send` puts the message in the kernel, or in the backlog when the kernel
    cannot take it now.  It returns ``False`` exactly when the backlog just became
    non-empty: the caller's pump must then call :meth:`flush` once :attr:`want` is
    met -- ``"write"`` (the socket, :attr:`fd`, is writable) or ``"retry"`` (the peer
    is not listening yet, or went away: try after :attr:`retry_s`) -- and again
    while :meth:`flush` returns ``False``.  Thread-safe (one lock).
    """

    __slots__ = ("addr", "path", "lock", "sock", "fd", "backlog", "want", "retry_s",
                 "_secret", "closed", "armed", "_tries")

    def __init__(self, addr: str, secret: bytes) -> None:
        self.addr = addr
        self.path = path_of(addr)
        self._secret = secret
        self.lock = threading.Lock()
        self.sock = None
        self.fd = -1
        self.backlog = deque()            # (buffers, memfd or -1), oldest first
        self.want = None
        self.retry_s = _RETRY_FAST
        self._tries = 0
        self.closed = False
        self.armed = False                # a flush is pending in the caller's pump

    def send(self, frames) -> bool:
        f = frames[0]
        if len(frames) == 1 and len(f) < MAX_RECORD:      # record()'s first case
            return self._send_records((([_B_ONE, f], -1),))
        return self._send_records((record(frames),))

    def send_many(self, msgs) -> bool:
        """Send several messages in order, one-frame ones batched into few records.
        Returns like :meth:`send`."""
        return self._send_records(records(msgs))

    def _send_records(self, recs) -> bool:
        with self.lock:
            if self.closed:
                for rec in recs:
                    discard(rec)
                return True
            i = 0
            if not self.backlog:
                if self.sock is None and not self._connect():
                    self.want = "retry"
                else:
                    while i < len(recs) and self._push(recs[i]):
                        i += 1
                    if i == len(recs):
                        return True
            self.backlog.extend(recs[i:])
            if self.armed:
                return True
            self.armed = True
            return False

    def flush(self) -> bool:
        """Send what the backlog holds, in order; ``True`` when it is empty (the
        outlet is no longer armed), ``False`` when :attr:`want` must be met again."""
        with self.lock:
            if self.closed:
                self.armed = False
                return True
            if self.sock is None and not self._connect():
                self.want = "retry"
                # Peers bind moments after we first send (a new proc or actor):
                # retry often for a while, then calmly (a dead peer is forgotten
                # by the node when its death is seen).
                self._tries += 1
                self.retry_s = _RETRY_FAST if self._tries < _FAST_TRIES else _RETRY_SLOW
                return False
            bl = self.backlog
            while bl:
                if not self._push(bl[0]):
                    return False
                bl.popleft()
            self.want = None
            self.retry_s = _RETRY_FAST
            self._tries = 0
            self.armed = False
            return True

    def discard(self) -> None:
        """Send nothing more: drop the backlog, refuse later messages.  The socket
        stays open (its fd may be in a poll set) until :meth:`close`."""
        with self.lock:
            self.closed = True
            while self.backlog:
                discard(self.backlog.popleft())

    def close(self) -> None:
        """:meth:`discard`, then close the connection.  Records already sent stay
        readable by the peer.  Idempotent."""
        self.discard()
        with self.lock:
            if self.sock is not None:
                self.sock.close()
                self.sock, self.fd = None, -1

    # -- under self.lock ---------------------------------------------------------
    def _connect(self) -> bool:
        # The link names the inbox's incarnation now (a respawned peer swapped it);
        # a stale name fails to connect and is retried like "not listening yet".
        try:
            target, incarnation = resolve(self.path)
        except OSError:                    # not bound yet, or gone
            return False
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        s.setblocking(False)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SNDBUF)
            s.connect(target)
            s.send(proof_record(self._secret, self.path, incarnation))
        except OSError:                    # not listening yet, backlog full, gone
            s.close()
            return False
        self.sock, self.fd = s, s.fileno()
        return True

    def _push(self, rec) -> bool:
        """Send one record; False when the kernel has no room now (kept by caller)."""
        bufs, mfd = rec
        err = send_bufs(self.fd, bufs, mfd)
        if err:
            if err == _EAGAIN:
                self.want = "write"
                return False
            if err == _EMSGSIZE:
                raise OSError(errno.EMSGSIZE, "record larger than the socket takes")
            # The peer went away (EPIPE, ECONNRESET): reconnect later, like zmq does;
            # the node forgets this outlet when it learns the peer is dead.
            self.sock.close()
            self.sock, self.fd = None, -1
            self.want = "retry"
            return False
        if mfd >= 0:
            os.close(mfd)
        return True


