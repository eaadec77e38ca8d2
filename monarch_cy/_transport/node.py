"""The node: one per process; owns the zmq context, the inbox and the I/O loop.

Threads and sockets
-------------------
* Transports: ``unix://`` addresses (the default between procs of one host) are
  AF_UNIX seqpacket sockets, :mod:`.unixsock`; ``tcp://`` and ``ipc://`` are zmq
  sockets with CurveZMQ.  A node binds its inboxes on one kind and sends to either.
* ``inbox`` (PULL, CURVE server; or a unix inbox) receives replies, port messages, logs, buffer
  releases and control messages for this process.  Actors have their own sockets
  (see :mod:`.actor_host`), read by the actor's thread directly, with no hop.
* Outgoing messages go through one PUSH socket per destination address, used from
  any thread under that destination's lock, so messages from one process to one
  destination keep their order (per-sender FIFO).
* Two inboxes (who reads which, and how waiting works: :mod:`.pump`).  ``inbox`` (background) is pumped by the node's I/O thread: logs,
  releases, control, channel ports and replies to calls made inside an event loop.
  ``direct`` receives replies to calls made from plain threads and is pumped by the
  thread blocked in ``Future.get()`` itself (under ``_pumpA``), so a reply wakes its
  caller with no thread hop and the I/O thread is not involved at all.  When no
  thread can pump ``direct`` (a second concurrent waiter, ``await`` or a callback on
  such a future), the I/O thread *adopts* it until those waiters are done.
  Handlers run in whichever thread pumps; they never block.
* One place watches proc exit: pidfds polled by the pump (``watch_pid``).  One place
  fails pending calls: :meth:`Node.proc_failed`.

Message frames: first frame = u16 header length (bit 15 set when more frames
follow) + pickled header tuple (its first item is the kind) + pickled payload; then, when the payload kept large buffers out
of band, a descriptor frame and the inline buffers (see :meth:`Node.encode`).
"""

from __future__ import annotations

import os
import pickle
import threading
from collections import deque

from monarch_cy import _config
from monarch_cy._errors import MessageTooLargeError
from monarch_cy._log import RateLimited
from monarch_cy._resource import Owned
from monarch_cy._transport import shm, unix_records, unixsock, wire
from monarch_cy._transport.auth import ZAP_ENDPOINT, JobKeys
from monarch_cy._transport.current import current_node, node_or_make, set_node  # noqa: F401
from monarch_cy._transport.fanout import (SUFFIX as _FAN, FanoutInbox, addr_of as fanout_addr,
                                         pack_reply as _fan_reply)
from monarch_cy._transport.protocol import (PROC_DEAD, RELEASE, REPLY, REPLY_BATCH,
                                            REPLY_PARTIAL, WAKE,
                                            buf as _buf, pack, unpack)
from monarch_cy._transport.ports import PortTable
from monarch_cy._transport.pump import PumpMixin
from monarch_cy._transport.senders import HWM, SendMixin

__all__ = ["Node", "set_node", "current_node", "node_or_make"]

_B = None   # zmq.backend.Socket: its send/recv skip pyzmq's per-call Python layers
_dumps = pickle.dumps
# Exact types whose plain pickle is what the transport's pickler would write (no
# reducer, no out-of-band buffer): a reply of one skips the pickler pool.
# Messages from the job's own peers that could not be handled (a bug or a version
# skew, never an outsider's: those are refused unread): one full traceback, then a
# count per minute, every node of this process together.
_UNHANDLED = RateLimited("transport", "messages that could not be handled", burst=1)
_COLLECTOR_FAILED = RateLimited("transport", "collectors that raised on a proc's death",
                                burst=1)
_SCALARS = frozenset((int, float, bool, str, bytes, type(None)))


_limit = [-1, 0]      # [the override generation it was read at, the limit]


def _max_message() -> int:
    """``MONARCH_CY_MAX_MESSAGE_BYTES``, read at this process's first message and
    again after each runtime override (``monarch.config.configure``): every message
    asks, so the environment is not parsed each time."""
    g = _config.generation()
    if _limit[0] != g:
        _limit[1] = _config.max_message_bytes()
        _limit[0] = g
    return _limit[1]


class Node(Owned, SendMixin, PumpMixin, PortTable):
    """Per-process messaging endpoint (see the module docstring).

    Lifetime (:class:`monarch_cy._resource.Owned`): :meth:`close` shuts it down in
    order (wakes and joins the I/O thread, flushes outlets, closes sockets, the
    zmq context and the shm pool, removes its socket files) and is idempotent; a
    node dropped without ``close()`` has its sockets and fds closed by its finalizer;
    in a forked child neither frees anything (the parent owns it).
    """

    def __init__(self, addr: str, keys: JobKeys, *, rundir: str, is_controller: bool,
                 proc_key: str | None = None, direct_addr: str | None = None,
                 remote_error=None) -> None:
        # How a reply the transport cannot carry reaches the caller:
        # remote_error(exception or None, text, actor, rank) -> the exception to
        # deliver (the actor model passes its ActorError).
        Owned.__init__(self)
        self.remote_error = remote_error or _plain_error
        self.keys = keys
        self.addr = addr
        self.key = proc_key or addr
        self.rundir = rundir
        self.is_controller = is_controller
        import weakref
        self._unix_inboxes = weakref.WeakSet()   # to interrupt their readers on close
        self._zmq = self.ctx = self._zap = None
        unix = addr.startswith(unixsock.SCHEME)
        if unix:                      # no zmq at all (unless a tcp:// peer appears)
            import select
            self._poller = select.poll()
            self._POLLIN, self._POLLOUT = select.POLLIN, select.POLLOUT
            self.again_errors = (unixsock.Again,)
            self.closed_errors = (unixsock.Closed,)
        else:
            zmq = self._ensure_zmq()
            self._zap = self.ctx.socket(zmq.REP)
            self._zap.bind(ZAP_ENDPOINT)      # before any server socket exists
            self._poller = zmq.Poller()
            self._POLLIN, self._POLLOUT = zmq.POLLIN, zmq.POLLOUT
            self.again_errors = (zmq.Again, unixsock.Again)
            self.closed_errors = (zmq.ContextTerminated, unixsock.Closed)
        self.inbox = self.server_socket(None, addr)
        self.direct_addr = direct_addr or addr + "d"
        self.direct = self.server_socket(None, self.direct_addr)
        self._inbox_fd = self.inbox.fileno() if unix else -1
        self._direct_fd = self.direct.fileno() if unix else -1
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._poller.register(self.inbox, self._POLLIN)
        if self._zap is not None:
            self._poller.register(self._zap, self._POLLIN)
        self._poller.register(self._wake_fd, self._POLLIN)
        self._pumpA = threading.Lock()
        self._adopt = 0               # waiters that need the I/O thread to pump direct
        self._loops = weakref.WeakSet()  # asyncio loops that pump direct themselves
        self._adopted = False
        self._out = {}
        self._out_lock = threading.Lock()
        self._init_ports()            # collectors and cast-tree relays (.ports)
        self.dead = {}                # proc key -> SupervisionError factory args
        self._fds = {}                # raw fd -> callback(fd) -> keep watching?
        self._todo = deque()          # callables to run in the pump
        self._releases = deque()      # (owner addr, seg_id)
        self._timers = []             # (deadline, fn)
        self._wfds = {}               # fd -> unix Outlet waiting for room to send
        self._corks = {}              # thread ident -> Cork, while that thread is corked
        self.pool = shm.ShmPool()
        self.handlers = {}            # extra kinds -> fn(node, hdr, frames)
        self._mu = threading.Lock()
        self._io_thread = None
        self._io_ident = None
        self._direct_timeout = -1     # ZMQ_RCVTIMEO now set on direct (ms)
        self._wake_msg = pack((WAKE,))
        self.on_proc_failed = []      # callbacks(proc_key, cause), run in the pump
        self.fanout = None            # this proc's FanoutInbox, once open_fanout() ran
        self._own(_release_unclosed, (self.inbox, self.direct, self._zap),
                  self._wake_fd, self.pool)

    # -- sockets -----------------------------------------------------------
    def _ensure_zmq(self):
        """zmq and this node's context, made on first need (tcp://, ipc://)."""
        global _B
        if self._zmq is None:
            import zmq
            import zmq.backend
            _B = zmq.backend.Socket
            from monarch_cy._transport import pump, senders
            pump._B = senders._B = _B
            self.ctx = zmq.Context()
            self.ctx.linger = 0
            self._zmq = zmq
        return self._zmq

    def server_socket(self, kind, addr: str):
        """A bound socket this node reads: a zmq socket of ``kind`` (default PULL;
        CURVE server), or for a ``unix://`` address a :class:`unixsock.Inbox`."""
        if addr.startswith(unixsock.SCHEME):
            box = unixsock.Inbox(addr, self.keys.secret)
            self._unix_inboxes.add(box)
            return box
        zmq = self._ensure_zmq()
        s = self.ctx.socket(zmq.PULL if kind is None else kind)
        s.linger = 0
        s.rcvhwm = HWM
        self.keys.server(s)
        s.bind(addr)
        return s

    def recv(self, sock, flags: int = 0) -> list:
        """Receive one message: ``[bytes, *zero-copy Frames]``.

        The sender sets bit 15 of the header length (:func:`pack`) when more frames
        follow, so a one-frame message costs no ``RCVMORE`` query (a slow call).
        ``flags`` 1 (NOBLOCK): raise ``Again`` (zmq's or unixsock's) when empty.
        """
        if sock.__class__ is unixsock.Inbox:
            return sock.recv(0 if flags else -1)
        f0 = _B.recv(sock, flags, True, False)
        if not f0[1] & 0x80:
            return [f0]
        out = [f0]
        while True:
            out.append(_B.recv(sock, 0, False, False))
            if not _B.get(sock, 13):
                return out

    def open_fanout(self):
        """Bind this proc's fan-out inbox (:mod:`.fanout`, at its ``addr_of``) and
        start its nogil forwarding thread; the :class:`.fanout.FanoutInbox`, or None
        when this node's address is not ``unix://``.  Idempotent; closed with the
        node."""
        if self.fanout is None and self.addr.startswith(unixsock.SCHEME):
            self.fanout = FanoutInbox(fanout_addr(self.addr), self.keys.secret)
        return self.fanout

    # -- payload encoding --------------------------------------------------
    def encode(self, obj, receivers) -> tuple:
        """Pickle ``obj`` for ``receivers`` (proc keys): ``(data, extra_frames)``.

        Large buffers go through shm when every receiver is on this host (ipc),
        else as zero-copy extra frames.  A message whose pickle and buffers together
        exceed ``MONARCH_CY_MAX_MESSAGE_BYTES`` (Monarch's ``codec_max_frame_length``)
        raises :class:`MessageTooLargeError` and nothing is placed.
        """
        data, bufs = wire.dumps(obj)
        size = len(data)
        if bufs:
            size += sum(b.nbytes for b in bufs)
        limit = _max_message()
        if size > limit:
            raise MessageTooLargeError(size, limit)
        if not bufs:
            return data, ()
        local = _same_host(self.addr) and all(_same_host(r) for r in receivers)
        descs, inline = [], []
        for b in bufs:
            if local and b.nbytes >= shm.SHM_THRESHOLD:
                descs.append(self.pool.put(b, receivers))
            else:
                descs.append(None)
                inline.append(b)
        return data, [pickle.dumps((self.addr, descs)), *inline]

    def decode(self, data, extras):
        """Inverse of :meth:`encode`."""
        if not extras:
            return pickle.loads(data)
        owner, descs = pickle.loads(_buf(extras[0]))
        inline = iter(extras[1:])
        bufs = []
        for d in descs:
            if d is None:
                mv = memoryview(_buf(next(inline)))
                bufs.append(bytearray(mv) if mv.nbytes < (1 << 20) else mv)
            else:
                bufs.append(shm.open_segment(d, self._post_release, owner))
        return pickle.loads(data, buffers=bufs)

    def _post_release(self, owner: str, seg_id: int) -> None:
        # Runs in whatever thread freed the last view: only queue + wake.
        self._releases.append((owner, seg_id))
        self.wake()

    # -- replies -----------------------------------------------------------
    def reply(self, addr: str, port_id: int, rank, ok: bool, value, receiver_key=None,
              unsendable=None, what=None):
        """Send a value (``ok``) or an exception to a port. Thread-safe.  A port
        whose address is a fan-out inbox (a cast down a tree whose forwarders gather
        the replies) gets the reply in the raw form its C thread reads.

        The port always gets an answer: when ``value`` cannot be encoded (any
        exception while pickling it or placing its buffers), it gets an error instead
        -- ``unsendable(exc, what)`` when given (the caller names the endpoint and
        rank), else a ``remote_error`` with the cause -- and when even that cannot be
        encoded, a plain-text one.  Never raises for an unencodable value.
        """
        try:
            if value.__class__ in _SCALARS:   # plain pickle: no pickler, no buffers
                data, extras = _dumps(value, 5), ()
                if len(data) > _max_message():
                    raise MessageTooLargeError(len(data), _max_message())
            else:
                data, extras = self.encode(value, (receiver_key or addr,))
        except Exception as e:  # noqa: BLE001 - the caller must hear of it, whatever it is
            receivers = (receiver_key or addr,)
            kind, ok = ("result" if ok else "error"), False
            try:
                err = unsendable(e, what) if unsendable is not None else self.remote_error(
                    None, f"the {kind} cannot be sent: {type(e).__name__}: {e}")
                data, extras = self.encode(err, receivers)
            except Exception as e2:  # noqa: BLE001
                data, extras = self.encode(self.remote_error(
                    None, f"the reply cannot be sent: {type(e).__name__}: {e} (and "
                          f"describing that failed: {type(e2).__name__}: {e2})"), ())
        if addr.endswith(_FAN):       # a nogil forwarder gathers this call's replies
            f0 = _fan_reply(port_id, rank, ok) + data
        else:
            h = _dumps((REPLY, port_id, rank, ok), 5)      # protocol.pack, inlined
            f0 = len(h).to_bytes(2, "little") + h + data
        self.send(addr, [f0, *extras] if extras else [f0])

    def _flush_releases(self) -> None:
        by_owner = {}
        while self._releases:
            owner, seg = self._releases.popleft()
            by_owner.setdefault(owner, []).append(seg)
        for owner, segs in by_owner.items():
            if owner == self.addr:
                for s in segs:
                    self.pool.release(s, self.key)
            elif owner not in self.dead:
                self.send(owner, [pack((RELEASE, self.key, segs))])

    def _drain(self, inbox) -> bool:
        """Handle what ``inbox`` holds now; True when it stopped at its cap of 1000
        messages (more may be queued), False when the socket ran dry."""
        recv = self.recv
        handle = self._handle_msg
        again = self.again_errors
        for _ in range(1000):
            try:
                frames = recv(inbox, 1)       # NOBLOCK (cheaper than asking EVENTS)
            except again:
                return False
            handle(frames)
        return True

    def _handle_msg(self, frames) -> None:
        """Act on one received message (a reply, a release, a control message)."""
        kind = None
        try:
            hdr, data = unpack(frames[0])
            kind = hdr[0]
            if kind == REPLY:
                col = self._ports.get(hdr[1])
                if col is None:
                    relay = self._relays.get(hdr[1])
                    if relay is not None:
                        relay.take(hdr[2], hdr[3], data, frames[1:])
                    return
                self._deliver(col, hdr[1], hdr[2], hdr[3], data, frames[1:])
            elif kind == REPLY_BATCH:
                col = self._ports.get(hdr[1])
                items = pickle.loads(data)
                if col is None:
                    relay = self._relays.get(hdr[1])
                    if relay is not None:
                        relay.take_batch(items)
                    return
                took, done = col.deliver_batch(items)
                if done:
                    self._ports.pop(hdr[1], None)
                    return
                for rank, ok, value in items[took:]:
                    if self._deliver(col, hdr[1], rank, ok, value, ()):
                        break
            elif kind == REPLY_PARTIAL:
                col = self._ports.get(hdr[1])
                if col is None:
                    relay = self._relays.get(hdr[1])
                    if relay is not None:
                        relay.take_partial(hdr[2], data, frames[1:])
                    return
                self._deliver(col, hdr[1], hdr[2], True, data, frames[1:], partial=True)
            elif kind == RELEASE:
                for seg in hdr[2]:
                    self.pool.release(seg, hdr[1])
            elif kind == PROC_DEAD:
                self.proc_failed(hdr[1], hdr[2], hdr[3] if len(hdr) > 3 else ())
            else:
                h = self.handlers.get(kind)
                if h is not None:
                    h(self, hdr, data, frames[1:])
        except Exception:   # from an authenticated peer: a bug or a version skew
            _UNHANDLED.log("handling a message of kind %r failed", kind, exc_info=True)

    def _deliver(self, col, port_id, rank, ok, data, extras, partial=False) -> bool:
        """Decode one reply and give it to its port's collector; True (and the port
        dropped) when the collector is done.  ``partial``: ``rank`` is the list of
        call ranks whose replies a forwarder folded into this one value."""
        try:
            value = self.decode(data, extras)
        except Exception as e:      # fail the call, never leave it pending
            import traceback
            what = "result" if ok else "error"
            why = f"{type(e).__name__}: {e}"
            exc = pickle.UnpicklingError(
                f"the {what} of the call arrived but could not be unpickled "
                f"here: {why}")
            exc.__cause__ = e
            if partial:
                rank, partial = rank[0], False
            value = self.remote_error(
                exc, f"{exc}\n" + "".join(traceback.format_exception(e)),
                col.actor, rank if col.rank is None else col.rank)
            ok = False
        if col.deliver_partial(rank, value) if partial else col.deliver(rank, ok, value):
            self._ports.pop(port_id, None)
            return True
        return False

    def proc_failed(self, proc_key: str, cause: str, addrs=()) -> int:
        """THE place where pending calls on a failed proc end (with SupervisionError).

        Runs in the pump.  Marks the proc dead (later calls fail at once), fails every
        port still waiting on it, drops its shm references, closes this node's
        sockets to ``proc_key``, its fan-out inbox and ``addrs`` (the proc's other
        addresses: messages queued for the dead proc are discarded, never delivered to
        a respawned one),
        and runs the ``on_proc_failed`` callbacks.  Returns how many pending calls it
        ended (0 when the proc was already known dead).
        """
        if proc_key in self.dead:
            return 0
        self.dead[proc_key] = cause
        ended = 0
        for pid, col in list(self._ports.items()):
            try:
                if col.proc_failed(proc_key, cause):
                    self._ports.pop(pid, None)
                    ended += 1
            except Exception:  # noqa: BLE001 - a collector's bug must not stop the rest
                _COLLECTOR_FAILED.log("failing a call on a dead proc raised", exc_info=True)
        self.pool.drop_receiver(proc_key)
        fan = (fanout_addr(proc_key),) if proc_key.startswith(unixsock.SCHEME) else ()
        self.forget((proc_key, *fan, *addrs))     # and its fan-out inbox (.fanout)
        self.wake_direct()
        for cb in list(self.on_proc_failed):
            cb(proc_key, cause)
        return ended

    def revive(self, proc_key: str) -> None:
        """``proc_key`` names a live proc again (it was respawned): calls reach it."""
        self.dead.pop(proc_key, None)

    def remove_addresses(self, addrs) -> None:
        """The processes that bound ``addrs`` on this host exited for good (their
        mesh was stopped; nothing will bind these addresses again): remove what they
        left on the file system, which an exit without closing (``os._exit``,
        SIGKILL) does not: a ``unix://`` inbox's link and socket, an ``ipc://``
        socket file.  Other schemes leave nothing.  Idempotent."""
        for a in addrs:
            if a.startswith(unixsock.SCHEME):
                unix_records.remove_inbox(unix_records.path_of(a))
            elif a.startswith("ipc://"):
                try:
                    os.unlink(a[6:])
                except OSError:
                    pass

    def close_for_exit(self, flush_timeout: float = 1.0, term_timeout: float = 1.0) -> None:
        """The process is about to exit (a worker's STOP): flush what is queued to
        send (at most ``flush_timeout`` s), close the inboxes and the handshake
        socket, and end the zmq context within ``term_timeout`` s.  The node then
        counts as closed (a pump loop ends, a later ``close()`` does nothing);
        nothing else is released: the exit does that."""
        if self.fanout is not None:
            self.fanout.close(flush_timeout)   # casts passing through go on first
        self.close_outlets(flush_timeout)
        self.inbox.close(linger=0)
        self.direct.close(linger=0)   # else ctx.term() waits for it
        if self.ctx is not None:
            if self._zap is not None:
                self._zap.close(linger=0)
            t = threading.Thread(target=self.ctx.term, daemon=True)
            t.start()
            t.join(term_timeout)
        self._closed = True
        self._take()                  # the finalizer has nothing left to release

    def _close_owned(self, release, args) -> None:
        """``close()``: every socket and the context, in order; pending ports are
        dropped."""
        self.wake()
        self.wake_direct()
        if self._io_thread is not None and self._io_thread is not threading.current_thread():
            self._io_thread.join(1.0)
        self.close_outlets(0.2)
        if self.fanout is not None:
            self.fanout.close()
        for box in list(self._unix_inboxes):
            box.interrupt()                   # actor threads reading unix inboxes
        for s in (self.inbox, self.direct, self._zap):
            if s is not None:
                s.close(linger=0)
        self._fds.clear()
        os.close(self._wake_fd)
        if self.ctx is not None:
            self.ctx.term()
        self.pool.close()
        for a in (self.addr, self.direct_addr):
            # (a unix inbox removed its own files, unless a newer incarnation owns them)
            if a.startswith("ipc://"):
                try:
                    os.unlink(a[6:])
                except OSError:
                    pass


def _release_unclosed(socks, wake_fd, pool) -> None:
    """Finalizer of a node dropped without close(): its sockets and fds."""
    for s in socks:
        if s is not None:
            s.close(linger=0)
    os.close(wake_fd)
    pool.close()


def _plain_error(exc, text, actor="", rank=None):
    return exc if exc is not None else RuntimeError(text)


def _same_host(addr: str) -> bool:
    return addr.startswith(unixsock.SCHEME) or addr.startswith("ipc://")
