"""An actor whose ``__init__`` runs long must not block its mesh's stop.

An actor's thread reads its socket only once ``__init__`` has returned, so a stop
sent meanwhile would wait for it, forever for an ``__init__`` that never returns
(Monarch's stop does not wait).  :class:`InitGuard` covers that window: once an
``__init__`` has run :data:`INIT_GRACE_S` seconds, a guard thread reads the
actor's socket until ``__init__`` returns:

* a stop (``__stop__``, ``__stop_mesh__``) is answered at once: the actor is
  stopped (``MeshStoppedError`` for every call, the ones already waiting included;
  ``stopped`` set, so its proc's stop goes on); if ``__init__`` ever returns, its
  ``__cleanup__(None)`` runs then and the instance is dropped;
* any other message is kept, in order, for the actor's thread, which handles those
  first once ``__init__`` returns (after a stop, they are answered as stopped).

One watcher thread per process (started with the first guard) starts the guard
threads; an ``__init__`` that returns within the grace costs no thread.  The socket
is read by one thread at a time: the guard thread ends, and is joined, before the
actor's thread reads.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque

from monarch_cy._errors import MeshStoppedError
from monarch_cy._log import logger
from monarch_cy._actor.host.actor_failure import mesh_stop_text
from monarch_cy._transport import unixsock
from monarch_cy._transport.protocol import unpack_call

__all__ = ["InitGuard", "INIT_GRACE_S"]

#: Seconds an ``__init__`` runs before its actor's socket is read by a guard thread.
INIT_GRACE_S = 0.5
_POLL_MS = 50            # how often a guard thread looks whether __init__ returned
_log = logger("actor")


class InitGuard:
    """Guards one actor's ``__init__`` (see the module docstring); ``host`` is its
    :class:`~.actor_host.ActorHost`, ``sock`` its socket."""

    def __init__(self, host, sock) -> None:
        self.host, self.sock = host, sock
        self.held = deque()              # messages kept for the actor's thread
        self._done = threading.Event()   # __init__ returned
        self._thread = None
        self._lock = threading.Lock()

    def arm(self) -> None:
        _watcher().add(time.monotonic() + INIT_GRACE_S, self)

    def disarm(self) -> deque:
        """``__init__`` returned (or raised): stop the guard thread, if one runs, and
        return what it kept, in arrival order.  Call before reading the socket."""
        self._done.set()
        with self._lock:
            t = self._thread
        if t is not None:
            t.join()
        return self.held

    def _start(self) -> None:
        """From the watcher: ``__init__`` is still running; read its socket."""
        with self._lock:
            if self._done.is_set():
                return
            self._thread = threading.Thread(
                target=self._run, daemon=True,
                name=f"monarch_cy-init-guard-{self.host.name}")
            self._thread.start()

    def _run(self) -> None:
        host, sock, node = self.host, self.sock, self.host.node
        again, closed = node.again_errors, node.closed_errors
        unix = isinstance(sock, unixsock.Inbox)
        while not self._done.is_set():
            try:
                if unix:
                    frames = sock.recv(_POLL_MS)
                elif sock.poll(_POLL_MS):
                    frames = node.recv(sock, 1)
                else:
                    continue
            except again:
                continue
            except closed:
                return
            try:
                self._take(host, frames)
            except Exception:  # noqa: BLE001 - never lose the guard over one message
                _log.exception("actor %s: a message during __init__", host.inst.actor_id)

    def _take(self, host, frames) -> None:
        (method, raddr, port_id, rank, rkey, _), payload = unpack_call(frames[0])
        if method not in ("__stop__", "__stop_mesh__"):
            if isinstance(host.failed, MeshStoppedError):
                host._handle(frames)         # answered as stopped (no instance runs)
            else:
                self.held.append(frames)
            return
        if host.failed is None:
            what = "stopped by client" if method == "__stop__" else \
                mesh_stop_text(host.node.decode(payload, frames[1:])[0][0])
            host.failed = MeshStoppedError(host.name, host.rank.rank,
                                           f"{what} while its __init__ was running",
                                           who=host.who)
            host.stopped.set()
            kept, self.held = self.held, deque()
            for f in kept:                   # sent before the stop: refused too
                host._handle(f)
        if port_id:
            host.node.reply(raddr, port_id, rank, True, None, rkey)


class _Watcher:
    """Starts each guard's thread when its grace has passed (one thread per
    process, for all guards)."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._due = []                    # heap of (deadline, n, guard)
        self._n = itertools.count()
        threading.Thread(target=self._run, daemon=True,
                         name="monarch_cy-init-watch").start()

    def add(self, deadline: float, guard: InitGuard) -> None:
        with self._cv:
            heapq.heappush(self._due, (deadline, next(self._n), guard))
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._due:
                    self._cv.wait()
                deadline, _, guard = self._due[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                heapq.heappop(self._due)
            if not guard._done.is_set():
                guard._start()


_the_watcher = None
_watcher_lock = threading.Lock()


def _watcher() -> _Watcher:
    global _the_watcher
    if _the_watcher is None:
        with _watcher_lock:
            if _the_watcher is None:
                _the_watcher = _Watcher()
    return _the_watcher
