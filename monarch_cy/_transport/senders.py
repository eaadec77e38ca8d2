"""Sending, for :class:`monarch_cy._transport.node.Node`: one connection per destination.

Mixed into the node.  ``unix://`` destinations get a :class:`unixsock.Outlet` (never
blocks; a backlog flushed by the pump), ``tcp://``/``ipc://`` ones a zmq PUSH socket
(CURVE client) used under its own lock.  Either way messages from this process to one
destination keep their order (per-sender FIFO).  A thread can *cork* itself
(:mod:`.cork`): what it sends is held and leaves as one burst.  Forgetting a
destination (its proc died) discards what is queued for it.
"""

from __future__ import annotations

import threading

from monarch_cy._transport import unixsock
from monarch_cy._transport.cork import Cork

__all__ = ["SendMixin", "HWM"]

HWM = 200_000        # zmq high-water marks (messages) of every socket
_B = None            # zmq.backend.Socket, set by Node._ensure_zmq


class SendMixin:
    """Outgoing connections of a :class:`Node` (see the module docstring)."""

    _held = None      # addr -> [frames...] held while its proc is being respawned

    def _client(self, addr: str):
        zmq = self._ensure_zmq()
        s = self.ctx.socket(zmq.PUSH)
        s.linger = 2000
        s.sndhwm = HWM
        s.reconnect_ivl = 2          # peers bind moments after we connect: retry
        s.reconnect_ivl_max = 0      # often, without backoff
        self.keys.client(s)
        s.connect(addr)
        return s

    def send(self, addr: str, frames) -> None:
        """Send one message (``frames[0]`` bytes, then zero-copy extras) to ``addr``.

        FIFO per destination; thread-safe (one lock per destination socket).  Never
        blocks on a slow or absent ``unix://`` peer (see :class:`unixsock.Outlet`).
        While this thread is corked (:meth:`cork`) the message is held for its burst.
        """
        if self._corks:
            c = self._corks.get(threading.get_ident())
            if c is not None:
                return c.add(addr, frames)
        if addr[0] == "u" and not self._held:          # the common case, inlined
            o = self._out.get(addr)
            if o is not None and not o.closed:
                if not o.send(frames):
                    self.call_in_pump(lambda: self._arm_outlet(o))
                return
        self._send_now(addr, frames)

    def _send_now(self, addr: str, frames) -> None:
        if self._held and self._hold_if_held(addr, frames):
            return
        self._send_out(addr, frames)

    def _send_out(self, addr: str, frames) -> None:
        if addr[0] == "u":
            return self._send_unix(addr, frames)
        ent = self._dest(addr, lambda a: (self._client(a), threading.Lock()))
        if ent is None:
            return
        bsend = _B.send
        with ent[1]:
            if ent[0].closed:             # forgotten meanwhile (its peer died)
                return self._send_out(addr, frames)
            if len(frames) == 1:
                bsend(ent[0], frames[0], 0, True, False)
            else:
                f0 = frames[0]            # flag "more frames follow" (see recv)
                bsend(ent[0], bytes((f0[0], f0[1] | 0x80)) + f0[2:], 2, True, False)
                last = len(frames) - 1
                for i in range(1, last + 1):
                    f = frames[i]
                    big = not isinstance(f, bytes) and memoryview(f).nbytes >= 65536
                    bsend(ent[0], f, 0 if i == last else 2, not big, False)

    def send_many(self, addr: str, msgs) -> None:
        """Send ``msgs`` (lists of frames) to ``addr`` in order, batched where the
        transport can (unix: few records).  Not held by a cork."""
        if addr[0] != "u" or (self._held and addr in self._held):
            for frames in msgs:
                self._send_now(addr, frames)
            return
        o = self._live_outlet(addr)
        if o is not None and not o.send_many(msgs):
            self.call_in_pump(lambda: self._arm_outlet(o))

    def cork(self) -> None:
        """Hold what this thread sends until :meth:`uncork` (see :mod:`.cork`)."""
        tid = threading.get_ident()
        if tid not in self._corks:
            self._corks[tid] = Cork(self)

    def uncork(self) -> None:
        """End this thread's burst: send what it holds."""
        c = self._corks.pop(threading.get_ident(), None)
        if c is not None:
            c.flush()

    def flush_cork(self) -> None:
        """Send what this thread holds now, staying corked (before it blocks)."""
        if self._corks:
            c = self._corks.get(threading.get_ident())
            if c is not None:
                c.flush()

    def _dest(self, addr: str, make):
        """The connection to ``addr``, made with ``make(addr)`` on first use; None once
        this node is closed."""
        ent = self._out.get(addr)
        if ent is None:
            with self._out_lock:
                ent = self._out.get(addr)
                if ent is None:
                    if self._closed:
                        return None
                    ent = self._out[addr] = make(addr)
        return ent

    def _live_outlet(self, addr: str):
        """The unix outlet to ``addr``, or None when the node is closed or ``addr`` was
        forgotten (its peer died: the message is dropped, as zmq's socket would)."""
        while True:
            o = self._dest(addr, lambda a: unixsock.Outlet(a, self.keys.secret))
            if o is None or not o.closed:
                return o
            if self._out.get(addr) is o:
                return None
            # forgotten and replaced meanwhile: look again

    def _send_unix(self, addr: str, frames) -> None:
        o = self._live_outlet(addr)
        if o is not None and not o.send(frames):
            self.call_in_pump(lambda: self._arm_outlet(o))

    # -- holding: messages for a proc being respawned wait for its new incarnation --
    def hold(self, addrs) -> None:
        """From now on, messages to ``addrs`` are kept here, in order, until
        :meth:`release_held` sends them or :meth:`discard_held` drops them.
        Idempotent.  Thread-safe."""
        with self._out_lock:
            if self._held is None:
                self._held = {}
            for a in addrs:
                self._held.setdefault(a, [])

    def _hold_if_held(self, addr, frames) -> bool:
        with self._out_lock:
            q = self._held.get(addr)
            if q is None:
                return False
            q.append(frames)
            return True

    def release_held(self, addr: str, first=()) -> int:
        """Send ``first`` (lists of frames), then what was held for ``addr``, in
        order; later messages go straight out.  Messages held while this runs are
        sent after the earlier ones (per-sender FIFO holds).  Returns how many held
        messages were sent."""
        sent = 0
        batch = list(first)
        while True:
            for frames in batch:
                self._send_out(addr, frames)
            with self._out_lock:
                q = self._held.get(addr) if self._held else None
                if not q:
                    if self._held:
                        self._held.pop(addr, None)
                    return sent
                batch, self._held[addr] = q, []
                sent += len(batch)

    def discard_held(self, addrs) -> int:
        """Drop what is held for ``addrs`` (their proc did not come back: the
        callers' ports are failed by :meth:`Node.proc_failed`) and stop holding."""
        n = 0
        with self._out_lock:
            for a in addrs:
                q = self._held.pop(a, None) if self._held else None
                n += len(q or ())
        return n

    def forget(self, addrs) -> None:
        """Close the sockets to ``addrs``, discarding what is queued on them; a later
        send opens a fresh one.  Thread-safe."""
        with self._out_lock:
            ents = [self._out.pop(a) for a in addrs if a in self._out]
        for ent in ents:
            if ent.__class__ is unixsock.Outlet:
                ent.discard()                 # nothing more leaves; the pump closes it
                self.call_in_pump(lambda o=ent: self._retire_outlet(o))
            else:
                s, lock = ent
                with lock:
                    s.close(linger=0)


    def close_outlets(self, linger_s: float) -> None:
        """Close every outgoing connection, first trying for up to ``linger_s`` to
        send what is still queued (zmq's linger; unix outlets are flushed here)."""
        with self._out_lock:
            ents = list(self._out.values())
            self._out.clear()
        unix = [e for e in ents if e.__class__ is unixsock.Outlet]
        for s, lock in (e for e in ents if e.__class__ is not unixsock.Outlet):
            with lock:
                s.close(linger=int(linger_s * 1000))
        import time
        end = time.monotonic() + linger_s
        while unix:
            unix = [o for o in unix if not o.flush()]
            if not unix or time.monotonic() >= end:
                break
            time.sleep(0.001)
        for e in ents:
            if e.__class__ is unixsock.Outlet:
                e.close()
