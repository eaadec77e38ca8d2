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

Records (first byte is the kind):

* ``0`` one frame: the rest of the record;
* ``1`` several frames: ``u16 count``, ``count x u32 length``, then the frames;
* ``2`` spilled: ``u16 count``, ``count x u64 length``; the frames are in a memfd
  passed with the record (``SCM_RIGHTS``), used when the message is larger than
  :data:`MAX_RECORD`.  The receiver maps it privately (copy-on-write); its frames are
  views of that mapping, freed when the last view goes.
* ``4`` a batch of one-frame messages (:meth:`Outlet.send_many`): ``u16 count``,
  ``count x u32 length``, then the messages.  The receiver hands them out one by one;
  while some wait, its ``fileno()`` stays readable.

Threads: an :class:`Inbox` is read by one thread at a time (the node's rules, see
:mod:`.pump`).  An :class:`Outlet` is used under its own lock; it never blocks: a
record the kernel cannot take now (the peer is slow, or not yet listening) waits in
the outlet's backlog, in order, until :meth:`Outlet.flush` (the node's pump calls it
when the socket is writable, or on a retry timer).
"""

from __future__ import annotations

import array
import errno
import hashlib
import hmac
import mmap
import os
import select
import socket
import struct
import threading
from collections import deque

__all__ = ["Inbox", "Outlet", "Again", "Closed", "SCHEME", "MAX_RECORD", "path_of"]

SCHEME = "unix://"
MAX_RECORD = 60 * 1024             # larger messages are spilled to a memfd
_TAG = b"monarch_cy unix v1|"
_NONCE = 16
_PROOF_LEN = 1 + _NONCE + 32
_ANC = socket.CMSG_SPACE(array.array("i", [0] * 4).itemsize * 4)
_SNDBUF = 4 << 20                   # capped by the kernel's wmem_max
_ONE, _MANY, _SPILL, _PROOF, _BATCH = 0, 1, 2, 3, 4
_RETRY_FAST, _FAST_TRIES, _RETRY_SLOW = 0.001, 2000, 0.05   # connect retries
_MAX_IOV = 1000                    # buffers per sendmsg (the kernel's IOV_MAX is 1024)
_B_ONE = bytes((_ONE,))
_TRUNC = int(socket.MSG_TRUNC | socket.MSG_CTRUNC)


class Again(Exception):
    """Nothing to receive within the timeout (the socket stays usable)."""


class Closed(Exception):
    """The inbox was closed (or interrupted for closing)."""


def path_of(addr: str) -> str:
    if not addr.startswith(SCHEME):
        raise ValueError(f"not a {SCHEME} address: {addr!r}")
    return addr[len(SCHEME):]


def _proof(secret: bytes, path: str, nonce: bytes) -> bytes:
    return hmac.digest(secret, _TAG + path.encode() + b"|" + nonce, hashlib.sha256)


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
        fds = _fds_of(anc)
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
                        bytes(mv[1 + _NONCE:n]), _proof(self._secret, self.path, nonce)):
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
                msgs = [[bytes(f)] for f in _split(data, lens)]
                self._pending.extend(msgs)
                os.eventfd_write(self._kfd, 1)
                return self._next_pending()
            if kind == _MANY and not fds:
                k = mv[1] | mv[2] << 8
                lens = struct.unpack_from(f"<{k}I", mv, 3)
                data = bytes(mv[3 + 4 * k:n])
                return _split(data, lens)
            if kind == _SPILL and len(fds) == 1:
                k = mv[1] | mv[2] << 8
                lens = struct.unpack_from(f"<{k}Q", mv, 3)
                total = sum(lens)
                if total == 0:
                    raise ValueError("empty spill")
                m = mmap.mmap(fds[0], total, mmap.MAP_PRIVATE,
                              mmap.PROT_READ | mmap.PROT_WRITE)
                frames = _split(m, lens)
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


def _fds_of(anc) -> list:
    fds = []
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            a = array.array("i")
            a.frombytes(data[:len(data) - len(data) % a.itemsize])
            fds.extend(a)
    return fds


def _split(data, lens) -> list:
    mv = memoryview(data)
    out, pos = [], 0
    for ln in lens:
        out.append(mv[pos:pos + ln])
        pos += ln
    if pos != len(mv):
        raise ValueError("frame lengths do not add up")
    out[0] = bytes(out[0])
    return out


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
        rec = _record(frames)
        with self.lock:
            if self.closed:
                _discard(rec)
                return True
            if not self.backlog:
                if self.sock is None and not self._connect():
                    self.want = "retry"
                elif self._push(rec):
                    return True
            self.backlog.append(rec)
            if self.armed:
                return True
            self.armed = True
            return False

    def send_many(self, msgs) -> bool:
        """Send several messages in order, one-frame ones batched into few records.
        Returns like :meth:`send`."""
        recs = _records(msgs)
        with self.lock:
            if self.closed:
                for rec in recs:
                    _discard(rec)
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
                _discard(self.backlog.popleft())

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
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        s.setblocking(False)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SNDBUF)
            s.connect(self.path)
            nonce = os.urandom(_NONCE)
            s.send(bytes((_PROOF,)) + nonce + _proof(self._secret, self.path, nonce))
        except OSError:                    # not listening yet, backlog full, gone
            s.close()
            return False
        self.sock, self.fd = s, s.fileno()
        return True

    def _push(self, rec) -> bool:
        """Send one record; False when the kernel has no room now (kept by caller)."""
        bufs, mfd = rec
        try:
            if mfd < 0:
                self.sock.sendmsg(bufs)
            else:
                self.sock.sendmsg(bufs, [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                          array.array("i", [mfd]))])
        except (BlockingIOError, InterruptedError):
            self.want = "write"
            return False
        except OSError as e:
            if e.errno == errno.EMSGSIZE:
                raise
            # The peer went away (EPIPE, ECONNRESET): reconnect later, like zmq does;
            # the node forgets this outlet when it learns the peer is dead.
            self.sock.close()
            self.sock, self.fd = None, -1
            self.want = "retry"
            return False
        if mfd >= 0:
            os.close(mfd)
        return True


def _record(frames) -> tuple:
    """``(buffers, memfd or -1)`` for one message (see the module docstring)."""
    if len(frames) == 1:
        f = frames[0]
        if len(f) < MAX_RECORD:
            return [_B_ONE, f], -1
    views = [memoryview(f).cast("B") for f in frames]
    lens = [v.nbytes for v in views]
    k = len(views)
    if k > 0xFFFF:
        raise ValueError(f"too many frames in one message ({k})")
    if sum(lens) + 3 + 4 * k <= MAX_RECORD and k < _MAX_IOV:
        return [bytes((_MANY, k & 0xFF, k >> 8)) + struct.pack(f"<{k}I", *lens), *views], -1
    hdr = bytes((_SPILL, k & 0xFF, k >> 8)) + struct.pack(f"<{k}Q", *lens)
    if len(hdr) > MAX_RECORD:
        raise ValueError(f"too many frames in one message ({k})")
    fd = os.memfd_create("monarch_cy-msg", os.MFD_CLOEXEC)
    try:
        for v in views:
            pos = 0
            while pos < v.nbytes:
                pos += os.write(fd, v[pos:pos + (1 << 30)])
    except BaseException:
        os.close(fd)
        raise
    return [hdr], fd


def _records(msgs) -> list:
    """Records for ``msgs`` (lists of frames), in order: runs of small one-frame
    messages share ``_BATCH`` records."""
    out, run, size = [], [], 3

    def close_run():
        if len(run) == 1:
            out.append(([_B_ONE, run[0]], -1))
        elif run:
            k = len(run)
            out.append(([bytes((_BATCH, k & 0xFF, k >> 8)) +
                         struct.pack(f"<{k}I", *map(len, run)), *run], -1))
        run.clear()

    for frames in msgs:
        if len(frames) == 1 and len(frames[0]) + 4 + 3 <= MAX_RECORD:
            f = frames[0]
            if size + len(f) + 4 > MAX_RECORD or len(run) == _MAX_IOV - 1:
                close_run()
                size = 3
            run.append(f)
            size += len(f) + 4
        else:
            close_run()
            size = 3
            out.append(_record(frames))
    close_run()
    return out


def _discard(rec) -> None:
    if rec[1] >= 0:
        os.close(rec[1])
