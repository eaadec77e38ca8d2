"""The receiving end of the ``unix://`` transport: :class:`Inbox` (see :mod:`.unixsock`)."""

from __future__ import annotations

import errno
import hmac
import mmap
import os
import select
import socket
import struct
import threading
import time
from collections import deque

from monarch_cy import _config
from monarch_cy._log import RateLimited
from monarch_cy._transport._unixio import recv_into
from monarch_cy._transport.unix_records import (
    _BATCH, _MANY, _NONCE, _ONE, _PROOF, _PROOF_LEN, _SPILL, MAX_RECORD, Again, Closed,
    link_incarnation, new_incarnation, path_of, proof, split, unlink_quietly,
)

__all__ = ["Inbox"]

# Refused connections, every inbox of this process together: a few lines, then one
# summary per minute with the count (a connection flood is no log flood).
REFUSALS = RateLimited("transport", "refused unix:// connections")
_LOOK_S = 0.002             # longest time reading ready connections without epoll
_SUN_PATH = 107             # the longest socket path (sockaddr_un.sun_path, less its NUL)
_EAGAIN = -errno.EAGAIN


class Inbox:
    """A bound, listening seqpacket socket and the connections it accepted.

    :meth:`recv` returns one message as a list of frames (the first is ``bytes``, the
    others ``memoryview``\\ s).  ``fileno()`` is an epoll fd, readable whenever a
    message or a connection is waiting (level-triggered), or a deadline passed.

    Binding makes a new incarnation (:attr:`incarnation`, see
    :func:`.unix_records.new_incarnation`): the socket is bound at :attr:`target`,
    then the link at :attr:`path` is swapped to it (the previous incarnation's socket
    file is removed).  Connections proving nothing within ``MONARCH_CY_AUTH_TIMEOUT``
    seconds of being accepted are closed unread (an :class:`.alarm.Alarm` in the epoll
    set wakes the reader for it), whether or not a thread reads the inbox: while none
    is inside :meth:`recv`, the process's :class:`_Gatekeeper` thread accepts and
    times out connections in its stead (never reading past a proof).  Refusals are
    logged through :data:`REFUSALS`.
    Connections are served one message each in turn, and epoll is asked at least
    every 2 ms while some always have more (new peers and deadlines do not starve).
    """

    def __init__(self, addr: str, secret: bytes) -> None:
        self.addr = addr
        self.path = path_of(addr)
        self._secret = secret
        self._auth_timeout = _config.auth_timeout()
        self.incarnation = new_incarnation(self.path)
        self.target = os.path.join(os.path.dirname(self.path), self.incarnation)
        if len(os.fsencode(self.target)) > _SUN_PATH:
            raise ValueError(f"{addr!r} is too long for a unix:// inbox: its socket "
                             f"{self.target!r} must fit in {_SUN_PATH} bytes (the path "
                             f"plus 12); use a shorter directory (TMPDIR)")
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            ls.setblocking(False)
            ls.bind(self.target)
            ls.listen(4096)
            link_incarnation(self.path, self.target, self.incarnation)
        except BaseException:
            ls.close()
            unlink_quietly(self.target)
            raise
        self._ls = ls
        self._lfd = ls.fileno()
        self._ep = select.epoll()
        self._ep.register(self._lfd, select.EPOLLIN)
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._ep.register(self._efd, select.EPOLLIN)
        self._pending = deque()           # messages of a batch not handed out yet
        self._kfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)   # set while any
        self._ep.register(self._kfd, select.EPOLLIN)
        self._alarm = None                # an Alarm, made at the first accept
        self._afd = -1
        self._conns = {}                  # fd -> [socket, proven?]
        self._unproven = {}               # fd -> deadline, in accept order
        self._ready = deque()             # fds epoll reported readable, not drained
        self._looked = 0.0                # when epoll was last asked (monotonic)
        self._seen = set()                # proof nonces used (replay protection)
        self._buf = bytearray(MAX_RECORD + 64)
        self._mv = memoryview(self._buf)
        self._closing = False
        self._polling = False             # the reader is inside epoll_wait
        self.closed = False
        self._reading = threading.Lock()  # held by the thread inside recv()
        self._sweep = False               # the gatekeeper waits for recv() to end
        _gatekeeper().watch(self, self._lfd)

    def fileno(self) -> int:
        return self._ep.fileno()

    # -- receiving ---------------------------------------------------------------
    def recv(self, timeout_ms: int = -1) -> list:
        """The next message; blocks up to ``timeout_ms`` (-1: forever, 0: not at all),
        then raises :class:`Again`.  Raises :class:`Closed` once closing.

        ``timeout_ms`` 0 asks epoll only when no connection is known to be ready at
        the call: a call that finds the connections it knew about empty raises
        :class:`Again` without looking for others.  Whoever drains with 0 therefore
        waits on :meth:`fileno` (level-triggered: it stays readable while anything is
        waiting) or calls again before blocking, as the node's pump and an actor's
        thread do; it saves a system call per message.  One thread reads at a time."""
        if self._pending:
            return self._next_pending()
        reading = self._reading
        reading.acquire()
        try:
            return self._recv(timeout_ms)
        finally:
            reading.release()
            if self._sweep:               # the gatekeeper found this inbox busy
                self._sweep = False
                _gatekeeper().rearm(self)

    def _recv(self, timeout_ms: int) -> list:
        ready = self._ready
        knew = timeout_ms == 0 and bool(ready)
        conns = self._conns
        rbuf, mv = self._buf, self._mv
        clock = time.monotonic
        while True:
            while ready:
                if clock() - self._looked >= _LOOK_S:
                    # Connections that always have more must not starve the rest (new
                    # peers, deadlines, closing): epoll is asked at least every 2 ms.
                    self._looked = clock()
                    msg = self._events(self._ep.poll(0), True)
                    if msg is not None:
                        return msg
                    continue
                fd = ready[0]
                c = conns.get(fd)
                if c is None:
                    ready.popleft()
                    continue
                fds = []
                n = recv_into(fd, rbuf, fds)
                if n <= 0:
                    if n == _EAGAIN and not fds:
                        ready.popleft()
                    else:                     # EOF, a truncated record, an error
                        self._failed_recv(fd, c, n, fds)
                    continue
                if len(ready) > 1:
                    ready.rotate(-1)          # one message per connection per turn
                if c[1] and not fds and rbuf[0] == _ONE:   # the common record
                    return [bytes(mv[1:n])]
                msg = self._parse(fd, c, n, fds)
                if msg is not None:
                    return msg
            if self._closing:
                if self.closed:
                    self._release()
                raise Closed(self.addr)
            if knew:
                raise Again()
            self._polling = True
            try:
                events = self._ep.poll(-1 if timeout_ms < 0 else timeout_ms / 1000)
            finally:
                self._polling = False
            self._looked = clock()
            if not events:
                if timeout_ms >= 0:
                    raise Again()
                continue
            msg = self._events(events, False)
            if msg is not None:
                return msg

    def _events(self, events, look: bool):
        """Act on what epoll reported (``look``: while fds are still ready); a message
        of a batch if one is waiting."""
        ready = self._ready
        queued = set(ready) if look else ()      # one set, not a deque scan per fd
        for fd, _ in events:
            if fd == self._lfd:
                self._accept()
            elif fd == self._afd:
                self._on_alarm()
            elif fd == self._efd:
                self._closing = True
            elif fd == self._kfd and self._pending:
                return self._next_pending()
            elif fd in self._conns and fd not in queued:
                ready.append(fd)
        return None

    def _accept(self) -> None:
        deadline = time.monotonic() + self._auth_timeout
        track = self._auth_timeout != float("inf")
        while True:
            try:
                s, _ = self._ls.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            s.setblocking(False)
            fd = s.fileno()
            self._conns[fd] = [s, False]
            if track:
                self._unproven[fd] = deadline
            self._ep.register(fd, select.EPOLLIN)
        if self._unproven:
            self._wake_at(next(iter(self._unproven.values())))

    # -- deadlines: unproven connections, the refusals' summary ----------------------
    def _wake_at(self, at: float) -> None:
        a = self._alarm
        if a is None:
            from monarch_cy._transport.alarm import Alarm
            a = self._alarm = Alarm()
            self._afd = a.fd
            self._ep.register(a.fd, select.EPOLLIN)
            _gatekeeper().watch(self, a.fd)
        if a.at is None or at < a.at:
            a.set(at, time.monotonic())

    def _on_alarm(self) -> None:
        """Close the connections whose proof is overdue (one whose proof arrived
        meanwhile is judged on it instead), log a due summary, set the next alarm."""
        a = self._alarm
        a.ack()
        a.at = None
        now = time.monotonic()
        for fd, deadline in list(self._unproven.items()):
            if deadline > now:
                break
            c = self._conns.get(fd)
            if c is None:
                self._unproven.pop(fd, None)
                continue
            fds = []
            n = recv_into(fd, self._buf, fds)
            if n == _EAGAIN and not fds:
                self._refuse(fd, c, f"no proof within {self._auth_timeout:g} s")
            elif n <= 0:
                self._failed_recv(fd, c, n, fds)
            else:
                self._parse(fd, c, n, fds)           # a proof: proven or refused
        REFUSALS.flush()
        nxt = [t for t in (next(iter(self._unproven.values()), None), REFUSALS.due())
               if t is not None]
        if nxt:
            self._wake_at(min(nxt))

    def _serve_unread(self) -> None:
        """The gatekeeper's turn while no thread is inside :meth:`recv`: accept what
        waits, close what is overdue, log a due summary (no message is read)."""
        if self._closing:
            return
        self._accept()
        a = self._alarm
        if a is not None and (a.at is None or a.at <= time.monotonic()):
            self._on_alarm()

    def _refuse(self, fd: int, c, why: str) -> None:
        """Drop an unproven connection, logging why (at a bounded rate)."""
        try:
            pid = struct.unpack("3i", c[0].getsockopt(socket.SOL_SOCKET,
                                                      socket.SO_PEERCRED, 12))[0]
        except OSError:
            pid = -1
        self._drop(fd)
        if not REFUSALS.log("refused a connection to %s from pid %d: %s; nothing it "
                            "sent was read", self.path, pid, why):
            due = REFUSALS.due()
            if due is not None:
                self._wake_at(due)                   # the summary, if nobody calls

    def _drop(self, fd: int) -> None:
        self._unproven.pop(fd, None)
        c = self._conns.pop(fd, None)
        if c is not None:
            try:
                self._ep.unregister(fd)
            except OSError:
                pass
            c[0].close()

    def _failed_recv(self, fd, c, n, fds) -> None:
        """A receive that gave no record: end of file (``n`` 0), a truncated record
        (``-EMSGSIZE``: refused when it was to be the proof) or an error.  The
        connection is dropped; descriptors that came with it are closed."""
        for f in fds:
            os.close(f)
        if n == -errno.EMSGSIZE and not c[1]:
            self._refuse(fd, c, "its first record is not a proof")
        else:
            self._drop(fd)

    def _parse(self, fd, c, n, fds):
        mv = self._mv
        kind = mv[0]
        try:
            if not c[1]:                      # the first record must be the proof
                if kind != _PROOF or n != _PROOF_LEN or fds:
                    why = "its first record is not a proof"
                else:
                    nonce = bytes(mv[1:1 + _NONCE])
                    if not hmac.compare_digest(bytes(mv[1 + _NONCE:n]), proof(
                            self._secret, self.path, self.incarnation, nonce)):
                        why = "bad proof (another job's, or for another inbox or incarnation)"
                    elif nonce in self._seen:
                        why = "replayed proof"
                    else:
                        self._seen.add(nonce)
                        self._unproven.pop(fd, None)
                        c[1] = True
                        return None
                self._refuse(fd, c, why)
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
        """Close every connection and the listener, remove the socket file and the
        link (unless a newer incarnation owns it by now).  Idempotent.
        A thread blocked in :meth:`recv` meanwhile gets :class:`Closed` and releases
        the rest.  ``linger`` is accepted for zmq-socket compatibility."""
        if self.closed:
            return
        self.closed = True
        self._closing = True
        _gatekeeper().forget(self)        # before any of its fds is closed
        self._ls.close()
        unlink_quietly(self.target)
        try:                              # unless a newer incarnation took the path
            if os.readlink(self.path) == self.incarnation:
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
            if self._alarm is not None:
                self._alarm.close()
        REFUSALS.flush()


class _Gatekeeper:
    """One daemon thread per process that keeps the inboxes' door while no thread
    reads them: it watches each inbox's listening socket and alarm (one-shot, in an
    epoll set of its own) and, when one is ready and no thread is inside the inbox's
    :meth:`Inbox.recv`, accepts the connections waiting, closes those whose proof is
    overdue and logs a due summary of refusals.  When a reader is inside, that reader
    does it (the same fds are in its epoll set), and the watch is re-armed as the
    reader leaves.  So a connection that proves nothing is closed after
    ``MONARCH_CY_AUTH_TIMEOUT`` even in an inbox nobody reads for hours (a caller's
    reply inbox between calls, an idle actor's)."""

    _ARM = select.EPOLLIN | select.EPOLLONESHOT

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._ep = select.epoll()
        self._lock = threading.RLock()    # held while an inbox is served
        self._by_fd = {}                  # watched fd -> its inbox
        self._fds = {}                    # inbox -> its watched fds
        threading.Thread(target=self._run, name="monarch_cy-inbox-gate",
                         daemon=True).start()

    def watch(self, inbox: Inbox, fd: int) -> None:
        with self._lock:
            self._by_fd[fd] = inbox
            self._fds.setdefault(inbox, []).append(fd)
            self._ep.register(fd, self._ARM)

    def forget(self, inbox: Inbox) -> None:
        """Stop watching ``inbox`` (waits for a turn serving it to end)."""
        with self._lock:
            for fd in self._fds.pop(inbox, ()):
                self._by_fd.pop(fd, None)
                try:
                    self._ep.unregister(fd)
                except OSError:
                    pass

    def rearm(self, inbox: Inbox) -> None:
        with self._lock:
            for fd in self._fds.get(inbox, ()):
                try:
                    self._ep.modify(fd, self._ARM)
                except OSError:
                    pass

    def _run(self) -> None:
        while True:
            try:
                events = self._ep.poll()
            except InterruptedError:
                continue
            for fd, _ in events:
                with self._lock:
                    inbox = self._by_fd.get(fd)
                    if inbox is None:
                        continue
                    inbox._sweep = True        # before trying: see Inbox.recv
                    if not inbox._reading.acquire(False):
                        continue               # its reader re-arms on leaving recv()
                    try:
                        inbox._sweep = False
                        inbox._serve_unread()
                    except Exception:  # noqa: BLE001 - the door stays kept
                        from monarch_cy._log import logger
                        logger("transport").exception("serving %s unread failed",
                                                      inbox.path)
                    finally:
                        inbox._reading.release()
                    self.rearm(inbox)


_GATE = None
_GATE_LOCK = threading.Lock()


def _gatekeeper() -> _Gatekeeper:
    """This process's gatekeeper (a fresh one in a forked child)."""
    global _GATE
    g = _GATE
    if g is None or g.pid != os.getpid():
        with _GATE_LOCK:
            g = _GATE
            if g is None or g.pid != os.getpid():
                g = _GATE = _Gatekeeper()
    return g


