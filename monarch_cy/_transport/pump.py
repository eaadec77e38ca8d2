"""The pump: which thread reads a node's inboxes, and how waiting works.

Mixed into :class:`monarch_cy._transport.node.Node`.  Exactly one thread at a time reads
each inbox:

* ``inbox`` (background): the node's I/O thread (a controller thread, or a worker's
  main thread), in :meth:`PumpMixin._io_loop`, which also answers ZAP requests,
  watches fds (pidfds, the fork server's status pipe), runs timers and queued
  callables, and flushes shm releases.  Handlers never block.
* ``direct`` (replies to calls): the thread blocked in ``Future.get()`` (under
  ``_pumpA``), in a plain blocking ``recv`` on the socket (no poll set: fewer
  syscalls and no Python per wake-up), so the reply wakes it without a hop; a
  WAKE message sent to ``direct`` (:meth:`PumpMixin.wake_direct`) ends that receive
  when its future was resolved elsewhere.  An asyncio loop that awaits pumps it
  from ``add_reader``; the I/O thread *adopts* it only while some waiter cannot
  pump it itself (a second concurrent waiter, a callback).
"""

from __future__ import annotations

import os
import threading
import time

from monarch_cy._transport import unixsock
from monarch_cy._transport.protocol import PENDING as _PENDING

__all__ = ["PumpMixin"]

_B = None            # zmq.backend.Socket, set when the first Node is made


class PumpMixin:
    """Inbox pumping and waiting for :class:`Node` (see the module docstring)."""

    # -- pump --------------------------------------------------------------
    def wake(self) -> None:
        try:
            os.eventfd_write(self._wake_fd, 1)
        except OSError:
            pass

    def call_in_pump(self, fn) -> None:
        """Run ``fn()`` in the pumping thread soon (thread-safe)."""
        self._todo.append(fn)
        self.wake()

    def add_timer(self, delay: float, fn) -> None:
        """Run ``fn()`` in the pump ``delay`` seconds from now (thread-safe)."""
        self.call_in_pump(lambda: self._timers.append((time.monotonic() + delay, fn)))

    def after_turn(self, fn) -> None:
        """From the pumping thread only: run ``fn()`` once the messages of this turn
        of the pump are handled (no wake-up: the pump is running)."""
        self._todo.append(fn)

    def serve_for(self, seconds: float, done) -> bool:
        """From the pumping thread, inside a handler that must wait: keep handling the
        background inbox (and answering CURVE handshakes) until ``done()`` is true or
        ``seconds`` have passed; whether ``done()`` became true.  Other handlers run
        meanwhile, so messages that must still be forwarded are."""
        end = time.monotonic() + seconds
        while not done():
            if time.monotonic() >= end:
                return False
            self._drain(self.inbox)
            if self._zap is None:                 # unix://: nothing to authenticate
                time.sleep(0.002)
            elif self._zap.poll(10):
                self.keys.handle_zap(self._zap)
        return True

    def watch_fd(self, fd: int, callback) -> None:
        """Call ``callback(fd)`` in the pump whenever ``fd`` is readable, until it
        returns False (then the fd is unregistered; closing it is the caller's)."""
        def reg():
            self._fds[fd] = callback
            self._poller.register(fd, self._POLLIN)
        self.call_in_pump(reg)

    def watch_pid(self, pid: int, callback) -> None:
        """Call ``callback(pid)`` in the pump when process ``pid`` exits."""
        def reg():
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                callback(pid)
                return

            def fired(fd):
                os.close(fd)
                callback(pid)
                return False
            self._fds[fd] = fired
            self._poller.register(fd, self._POLLIN)
        self.call_in_pump(reg)

    # -- unix outlets with a backlog (see unixsock.Outlet) -------------------------
    def _arm_outlet(self, o) -> None:
        """In the pump: flush ``o`` when its socket is writable or after its retry
        delay, until its backlog is empty."""
        if o.closed:
            return self._retire_outlet(o)
        if o.want == "write" and o.fd >= 0:
            if o.fd not in self._wfds:
                self._wfds[o.fd] = o
                self._poller.register(o.fd, self._POLLOUT)
        else:
            self._timers.append((time.monotonic() + o.retry_s, lambda: self._flush_outlet(o)))

    def _flush_outlet(self, o) -> None:
        if not o.flush():
            self._arm_outlet(o)

    def _retire_outlet(self, o) -> None:
        """In the pump: stop watching ``o`` and close it (it was forgotten)."""
        if self._wfds.get(o.fd) is o:
            del self._wfds[o.fd]
            self._poller.unregister(o.fd)
        o.close()

    def _poll_once(self, timeout_ms) -> None:
        if self._timers:
            now = time.monotonic()
            due = [t for t in self._timers if t[0] <= now]
            if due:
                self._timers = [t for t in self._timers if t[0] > now]
                for _, fn in due:
                    _guard(fn)
                timeout_ms = 0
            else:
                nxt = min(t[0] for t in self._timers)
                ms = max(0, int((nxt - now) * 1000) + 1)
                timeout_ms = ms if timeout_ms is None or timeout_ms < 0 else \
                    min(ms, timeout_ms)
        events = self._poller.poll(timeout_ms)
        for sock, _ in events:
            # zmq sockets come back as themselves, unix inboxes as their fd
            if sock is self.inbox or sock == self._inbox_fd:
                self._drain(self.inbox)
            elif sock is self.direct or sock == self._direct_fd:
                self._drain(self.direct)
            elif sock is self._zap and sock is not None:
                self.keys.handle_zap(self._zap)
            elif sock == self._wake_fd:
                try:
                    os.eventfd_read(self._wake_fd)
                except BlockingIOError:
                    pass
            elif sock in self._wfds:
                o = self._wfds.pop(sock)
                self._poller.unregister(sock)
                _guard(self._flush_outlet, o)
            elif sock in self._fds:
                cb = self._fds[sock]
                keep = True
                try:
                    keep = cb(sock)
                except Exception:
                    from monarch_cy._log import logger
                    logger("transport").exception("a watch callback raised; watch dropped")
                    keep = False
                if not keep:
                    self._fds.pop(sock, None)
                    self._poller.unregister(sock)
        while self._todo:
            _guard(self._todo.popleft())
        if self._releases:
            self._flush_releases()

    def wake_direct(self) -> None:
        """Wake a thread pumping ``direct`` (its futures may have been resolved
        elsewhere, e.g. failed by a proc death): a WAKE message, sent to ``direct``
        over an ordinary authenticated connection, ends its blocking receive."""
        if not self._closed:
            try:
                self.send(self.direct_addr, [self._wake_msg])
            except Exception:  # noqa: BLE001 - closing: nobody to wake
                pass

    def adopt(self) -> None:
        """Ask the I/O thread to pump ``direct`` too (until :meth:`unadopt`)."""
        with self._mu:
            self._adopt += 1
            first = self._adopt == 1
        if first:
            self.wake()

    def unadopt(self) -> None:
        with self._mu:
            self._adopt -= 1
            last = self._adopt == 0
        if last:
            self.wake()    # the I/O thread lets go of direct

    def _io_loop(self) -> None:
        while not self._closed:
            holding = False
            if self._adopt > 0 and self._pumpA.acquire(False):
                holding = True
                if not self._adopted:
                    self._poller.register(self.direct, self._POLLIN)
                    self._adopted = True
            elif self._adopted:
                self._poller.unregister(self.direct)
                self._adopted = False
            try:
                # adopted but direct busy (a thread pumps it): re-check soon
                self._poll_once(5 if self._adopt > 0 and not holding else -1)
                if holding and self._adopt == 0:
                    self._poller.unregister(self.direct)
                    self._adopted = False
            finally:
                if holding:
                    self._pumpA.release()

    def start_io_thread(self) -> None:
        t = threading.Thread(target=self._io_loop, name="monarch_cy-io", daemon=True)
        self._io_thread = t
        t.start()
        self._io_ident = t.ident

    def serve_forever(self) -> None:
        """Pump in this thread until closed (workers' main thread)."""
        self._io_thread = threading.current_thread()
        self._io_ident = threading.get_ident()
        self._io_loop()

    def loop_reader(self, loop) -> None:
        """Make the running asyncio ``loop`` pump ``direct`` when it is readable
        (once per loop), so an awaited reply wakes the loop with no thread hop."""
        loops = self._loops
        if loop in loops:
            return
        loops.add(loop)
        if self.direct.__class__ is unixsock.Inbox:
            fd = self.direct.fileno()           # level-triggered epoll fd
        else:
            fd = _B.get(self.direct, 14)        # ZMQ_FD (edge-triggered: drain fully)
        direct, lock = self.direct, self._pumpA

        def on_readable():
            if lock.acquire(False):
                try:
                    more = self._drain(direct)   # to EAGAIN: re-arms the edge
                finally:
                    lock.release()
                if more:
                    loop.call_soon(on_readable)
            else:                              # a thread is pumping: look again soon
                loop.call_later(0.0005, on_readable)

        loop.add_reader(fd, on_readable)
        loop.call_soon(on_readable)

    def poke(self) -> None:
        """Process whatever ``direct`` holds now, without blocking (for ``done()``)."""
        if self._pumpA.acquire(False):
            try:
                self._drain(self.direct)
            finally:
                self._pumpA.release()

    def wait(self, fut, timeout) -> bool:
        """Block until ``fut`` (a reply on ``direct``) resolves (True) or ``timeout``
        passes (False), pumping ``direct`` in this thread when it is free."""
        if self._corks:
            self.flush_cork()            # what this thread holds must not wait on us
        if threading.get_ident() == self._io_ident:
            return self._pump_until(fut, timeout)
        if not self._pumpA.acquire(False):
            self.adopt()
            try:
                ok = fut._lock.acquire(True, -1 if timeout is None else timeout)
                if ok:
                    fut._lock.release()
                return ok
            finally:
                self.unadopt()
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            direct = self.direct
            recv, handle = self.recv, self._handle_msg
            again = self.again_errors
            unix = direct.__class__ is unixsock.Inbox
            while fut._value is _PENDING:
                if deadline is None:
                    ms = -1
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    ms = max(1, int(left * 1000))
                try:
                    if unix:
                        frames = direct.recv(ms)   # blocks without the GIL
                    else:
                        if ms != self._direct_timeout:    # ZMQ_RCVTIMEO
                            _B.set(direct, 27, ms)
                            self._direct_timeout = ms
                        frames = recv(direct)      # blocks without the GIL
                except again:
                    continue
                handle(frames)
            return True
        finally:
            self._pumpA.release()
            if self._adopt > 0:
                self.wake()

    def _pump_until(self, fut, timeout) -> bool:
        # Nested wait inside the I/O thread (a handler waiting): pump everything here.
        deadline = None if timeout is None else time.monotonic() + timeout
        while not fut.done():
            if deadline is None:
                ms = 20
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                ms = max(1, min(20, int(left * 1000)))
            self._poll_once(ms)
            if self._pumpA.acquire(False):
                try:
                    self._drain(self.direct)
                finally:
                    self._pumpA.release()
        return True


def _guard(fn, *args) -> None:
    """Run a pump callback; a failing one is reported, never kills the pump."""
    try:
        fn(*args)
    except Exception:
        from monarch_cy._log import logger
        logger("transport").exception("a callback run by the pump raised")
