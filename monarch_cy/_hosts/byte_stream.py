"""One flow-controlled byte stream between two actors (or an actor and the client).

Both ends live in asyncio loops (an async actor's loop, or the client's).  Each end
holds the other end's :class:`Port` and its own :class:`PortReceiver`; messages on
one port arrive in the order they were sent.  The messages are small tuples:

* ``(DATA, bytes)`` -- the next bytes of this direction;
* ``(CREDIT, n)`` -- the receiving end has written ``n`` bytes of DATA to its sink
  (a socket, a pty, stdout): the sender may send ``n`` more;
* ``(EOF,)`` -- the sender's source ended: no more DATA this way (a half close);
* ``(ABORT, why)`` -- the sender broke or gave up: the receiver drops the stream at
  once (a TCP reset, not a close);
* anything else goes to ``on_message`` (the shell's window size, say).

**Backpressure**: a sender has at most ``window`` bytes (4 MiB) sent and not yet
credited; :meth:`StreamEnd.send` blocks past that, so the sender stops reading its
source and the source's own flow control (TCP's window, a pipe's buffer) pushes back
on whoever writes into it.  Credits are dispatched as they arrive, apart from the
DATA queued for the sink, so a sink that blocks never stops the other direction.
Memory per direction is bounded by the window on both ends.

**Who closes what**: a ``StreamEnd`` owns its receiver (dropped by :meth:`close`) and
nothing else; the caller owns the source and the sink (``read``, ``write`` and
``write_eof`` are the caller's functions) and closes them.  :meth:`abort` tells the
other end (best effort: it may be gone) and wakes every waiter here with
``ConnectionAbortedError``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

__all__ = ["StreamEnd", "DATA", "CREDIT", "EOF", "ABORT", "WINDOW", "CHUNK"]

DATA, CREDIT, EOF, ABORT = "data", "credit", "eof", "abort"
WINDOW = 4 << 20        # bytes a sender may have in flight, not yet credited
CHUNK = 64 << 10        # the most bytes a source read takes at a time


class StreamEnd:
    """This end of a stream: sends to ``peer``, receives from ``inbox``.

    Call :meth:`start` with the sink's ``write(data)`` and ``write_eof()`` coroutine
    functions; then :meth:`pump` copies a source into the stream, :meth:`sink_done`
    waits until the other end's EOF was written to the sink.  ``on_message(msg)`` (a
    plain function, run in the loop) takes messages of other kinds.
    """

    def __init__(self, peer, inbox, *, window: int = WINDOW,
                 on_message: Callable[[Any], None] | None = None) -> None:
        self.peer = peer
        self.inbox = inbox
        self._window = window
        self._in_flight = 0
        self._opened = asyncio.Event()
        self._opened.set()
        self._on_message = on_message
        self._broken: BaseException | None = None
        self._queue: asyncio.Queue = asyncio.Queue()
        self._tasks: list[asyncio.Task] = []
        self._sink: asyncio.Task | None = None
        self._closed = False

    # -- sending ----------------------------------------------------------------
    async def send(self, data: bytes) -> None:
        """Send ``data`` once the window has room (blocks while it is full)."""
        while self._in_flight >= self._window:
            self._check()
            self._opened.clear()
            await self._opened.wait()
        self._check()
        self._in_flight += len(data)
        self.peer.send((DATA, data))

    def send_eof(self) -> None:
        self._check()
        self.peer.send((EOF,))

    def send_message(self, msg) -> None:
        """A message of the caller's own kind (no flow control)."""
        self._check()
        self.peer.send(msg)

    async def pump(self, read: Callable[[], Awaitable[bytes]]) -> None:
        """Copy ``read()`` into the stream until it returns ``b""``, then send EOF."""
        while True:
            await self._wait_open()
            data = await read()
            if not data:
                self.send_eof()
                return
            await self.send(data)

    async def _wait_open(self) -> None:
        while self._in_flight >= self._window:
            self._check()
            self._opened.clear()
            await self._opened.wait()
        self._check()

    def _check(self) -> None:
        if self._broken is not None:
            raise self._broken

    # -- receiving --------------------------------------------------------------
    def start(self, write: Callable[[bytes], Awaitable[None]],
              write_eof: Callable[[], Awaitable[None]]) -> None:
        """Start dispatching the inbox, and writing DATA into the sink."""
        self._tasks.append(asyncio.ensure_future(self._dispatch()))
        self._sink = asyncio.ensure_future(self._write_sink(write, write_eof))
        self._tasks.append(self._sink)

    async def sink_done(self) -> None:
        """Return once the other end's EOF reached the sink; raise if the stream
        broke first (``ConnectionAbortedError`` for the other end's ABORT, or the
        sink's own error)."""
        await asyncio.shield(self._sink)

    async def _dispatch(self) -> None:
        try:
            while True:
                msg = await self.inbox.recv()
                kind = msg[0] if isinstance(msg, tuple) and msg else None
                if kind == CREDIT:
                    self._in_flight -= msg[1]
                    if self._in_flight < self._window:
                        self._opened.set()
                elif kind == DATA or kind == EOF:
                    self._queue.put_nowait(msg)
                elif kind == ABORT:
                    self._break(ConnectionAbortedError(msg[1]))
                    return
                elif self._on_message is not None:
                    self._on_message(msg)
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001 - a dead peer's error ends the stream
            self._break(e)

    async def _write_sink(self, write, write_eof) -> None:
        while True:
            msg = await self._queue.get()
            if msg is None:                  # broken: _break put it there
                raise self._broken
            if msg[0] == EOF:
                await write_eof()
                return
            await write(msg[1])
            if not self._closed:
                self.peer.send((CREDIT, len(msg[1])))

    def _break(self, exc: BaseException) -> None:
        if self._broken is None:
            self._broken = exc
        self._opened.set()                   # wake senders: they raise
        self._queue.put_nowait(None)         # wake the sink: it raises

    # -- ending -----------------------------------------------------------------
    def tell_abort(self, why: str) -> None:
        """Send ABORT to the other end only (best effort; touches nothing of this
        end's loop, so any thread may call it)."""
        try:
            self.peer.send((ABORT, why))
        except Exception:  # noqa: BLE001 - the other end may be gone already
            pass

    def abort(self, why: str) -> None:
        """Tell the other end to drop the stream (best effort), and break this end."""
        if self._broken is None:
            self.tell_abort(why)
        self._break(ConnectionAbortedError(why))

    async def close(self) -> None:
        """Stop the tasks and drop the inbox (later messages to it are dropped)."""
        if self._closed:
            return
        self._closed = True
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            self.inbox.close()
        except Exception:  # noqa: BLE001 - the node may be stopping
            pass
