"""The receiving end of the ``unix://`` transport: :class:`Inbox` (see :mod:`.unixsock`)."""

from __future__ import annotations

import hmac
import mmap
import os
import select
import socket
import struct
from collections import deque

from monarch_cy._transport.unix_records import (
    _ANC, _BATCH, _MANY, _NONCE, _ONE, _PROOF, _PROOF_LEN, _SPILL, _TRUNC, MAX_RECORD, Again,
    Closed, fds_of, path_of, proof, split,
)

__all__ = ["Inbox"]


class Inbox:
    """A bound, listening seqpacket socket and the connections it accepted.

    :meth:`recv` returns one message as a list of frames (the first is ``bytes``, the
    others ``memoryview``\\ s).  ``fileno()`` is an epoll fd, readable whenever a
    message or a connection is waiting (level-triggered).
    """

    def __init__(self, addr: str, secret: bytes) -> None:
        self.addr = addr
        self.path = path_of(addr)
        self._secret = secret
        try:
            os.unlink(self.path)          # a previous incarnation's (respawn)
        except FileNotFoundError:
            pass
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        ls.setblocking(False)
        ls.bind(self.path)
        ls.listen(4096)
        self._ls = ls
        self._lfd = ls.fileno()
        self._ep = select.epoll()
        self._ep.register(self._lfd, select.EPOLLIN)
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._ep.register(self._efd, select.EPOLLIN)
        self._pending = deque()           # messages of a batch not handed out yet
        self._kfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)   # set while any
        self._ep.register(self._kfd, select.EPOLLIN)
        self._conns = {}                  # fd -> [socket, proven?]
        self._ready = deque()             # fds epoll reported readable, not drained
        self._seen = set()                # proof nonces used (replay protection)
        self._buf = bytearray(MAX_RECORD + 64)
        self._mv = memoryview(self._buf)
        self._closing = False
        self._polling = False             # the reader is inside epoll_wait
        self.closed = False

    def fileno(self) -> int:
        return self._ep.fileno()

    # -- receiving ---------------------------------------------------------------
    def recv(self, timeout_ms: int = -1) -> list:
        """The next message; blocks up to ``timeout_ms`` (-1: forever, 0: not at all),
        then raises :class:`Again`.  Raises :class:`Closed` once closing."""
        if self._pending:
            return self._next_pending()
        ready = self._ready
        conns = self._conns
        buf = [self._buf]
        while True:
            while ready:
                fd = ready[0]
                c = conns.get(fd)
                if c is None:
                    ready.popleft()
                    continue
                try:
                    n, anc, flags, _ = c[0].recvmsg_into(buf, _ANC)
                except BlockingIOError:
                    ready.popleft()
                    continue
                except OSError:
                    self._drop(fd)
                    continue
                if n == 0 and not anc:        # EOF: the peer closed
                    self._drop(fd)
                    continue
                if len(ready) > 1:
                    ready.rotate(-1)          # one message per connection per turn
                msg = self._parse(fd, c, n, anc, flags)
                if msg is not None:
                    return msg
            if self._closing:
                if self.closed:
                    self._release()
                raise Closed(self.addr)
            self._polling = True
            try:
                events = self._ep.poll(-1 if timeout_ms < 0 else timeout_ms / 1000)
            finally:
                self._polling = False
            if not events:
                if timeout_ms >= 0:
                    raise Again()
                continue
            for fd, _ in events:
                if fd == self._lfd:
                    self._accept()
                elif fd == self._efd:
                    self._closing = True
                elif fd == self._kfd and self._pending:
                    return self._next_pending()
                elif fd in conns:
                    ready.append(fd)

    def _accept(self) -> None:
        while True:
            try:
                s, _ = self._ls.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            s.setblocking(False)
            fd = s.fileno()
            self._conns[fd] = [s, False]
            self._ep.register(fd, select.EPOLLIN)

    def _drop(self, fd: int) -> None:
        c = self._conns.pop(fd, None)
        if c is not None:
            try:
                self._ep.unregister(fd)
            except OSError:
                pass
            c[0].close()

    def _parse(self, fd, c, n, anc, flags):
        fds = fds_of(anc)
        mv = self._mv
        kind = mv[0] if n else -1
        try:
            if flags & _TRUNC:
                raise ValueError("record truncated")
            if not c[1]:                      # the first record must be the proof
                if kind != _PROOF or n != _PROOF_LEN or fds:
                    raise ValueError("no proof")
                nonce = bytes(mv[1:1 + _NONCE])
                if nonce in self._seen or not hmac.compare_digest(
                        bytes(mv[1 + _NONCE:n]), proof(self._secret, self.path, nonce)):
                    raise ValueError("bad proof")
                self._seen.add(nonce)
                c[1] = True
                return None
            if kind == _ONE and not fds:
                return [bytes(mv[1:n])]
            if kind == _BATCH and not fds:
                k = mv[1] | mv[2] << 8
                lens = struct.unpack_from(f"<{k}I", mv, 3)
                if k < 2:
                    raise ValueError("batch of fewer than 2 messages")
                data = bytes(mv[3 + 4 * k:n])
                msgs = [[bytes(f)] for f in split(data, lens)]
                self._pending.extend(msgs)
                os.eventfd_write(self._kfd, 1)
                return self._next_pending()
            if kind == _MANY and not fds:
                k = mv[1] | mv[2] << 8
                lens = struct.unpack_from(f"<{k}I", mv, 3)
                data = bytes(mv[3 + 4 * k:n])
                return split(data, lens)
            if kind == _SPILL and len(fds) == 1:
                k = mv[1] | mv[2] << 8
                lens = struct.unpack_from(f"<{k}Q", mv, 3)
                total = sum(lens)
                if total == 0:
                    raise ValueError("empty spill")
                m = mmap.mmap(fds[0], total, mmap.MAP_PRIVATE,
                              mmap.PROT_READ | mmap.PROT_WRITE)
                frames = split(m, lens)
                frames[0] = bytes(frames[0])
                return frames
            raise ValueError(f"bad record kind {kind}")
        except (ValueError, struct.error, OSError):
            self._drop(fd)                    # nothing of it is used
            return None
        finally:
            for f in fds:
                os.close(f)

    def _next_pending(self) -> list:
        msg = self._pending.popleft()
        if not self._pending:
            try:
                os.eventfd_read(self._kfd)
            except BlockingIOError:
                pass
        return msg

    # -- closing -----------------------------------------------------------------
    def interrupt(self) -> None:
        """Make the reading thread's :meth:`recv` raise :class:`Closed` (thread-safe)."""
        try:
            os.eventfd_write(self._efd, 1)
        except OSError:
            pass

    def close(self, linger=None) -> None:
        """Close every connection and the listener and unlink the path.  Idempotent.
        A thread blocked in :meth:`recv` meanwhile gets :class:`Closed` and releases
        the rest.  ``linger`` is accepted for zmq-socket compatibility."""
        if self.closed:
            return
        self.closed = True
        self._closing = True
        self._ls.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
        if self._polling:
            self.interrupt()
            return
        self._release()

    def _release(self) -> None:
        for fd in list(self._conns):
            self._drop(fd)
        if not self._ep.closed:
            self._ep.close()
            os.close(self._efd)
            os.close(self._kfd)


