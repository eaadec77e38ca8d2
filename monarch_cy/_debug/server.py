"""The endpoint ``monarch-cy debug`` connects to, and the file that finds it.

Started by the debug controller (:mod:`.controller`), in the controller's process:
a zmq ``ROUTER`` socket on TCP, a CURVE server with the job's keys
(:class:`monarch_cy._transport.auth.JobKeys`), behind a ZAP handler bound first on
its own context.  A client must hold the job secret to complete the handshake;
libzmq delivers nothing from a peer before that, so nothing a peer without the
secret sends is read, let alone deserialized (and nothing that is read is
deserialized either: frames are UTF-8 text).  A refused peer is logged.

Where: ``MONARCH_DEBUG_SERVER_HOST`` (default ``localhost``, as Monarch) and
``MONARCH_DEBUG_SERVER_PORT`` (default: a free port; Monarch's fixed 27000 would
make two jobs on one machine collide).  The address, the controller's pid and the
secret are written to ``debug.json`` (mode 0600) in the job's run directory (mode
0700), which is how ``monarch-cy debug`` finds a job of this user on this machine.

Messages (multipart, after the ROUTER's identity): from the client ``hello``,
``line <text>``, ``ping`` (every second; a client silent for :data:`CLIENT_TIMEOUT`
seconds is gone), ``bye``; to it ``out <text>`` and ``bye <reason>``.  One remote
client at a time, as Monarch: a new one takes over and the old one is told so.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time

from monarch_cy._log import logger

__all__ = ["DebugServer", "start", "bind_address", "DISCOVERY", "CLIENT_TIMEOUT"]

DISCOVERY = "debug.json"
CLIENT_TIMEOUT = 5.0
_OUT = "inproc://monarch_cy-debug-out"
_log = logger("debug")


#: Monarch's variables (``monarch.tools.debug_env``) and default host.
_MONARCH_DEBUG_SERVER_HOST_ENV_VAR = "MONARCH_DEBUG_SERVER_HOST"
_MONARCH_DEBUG_SERVER_PORT_ENV_VAR = "MONARCH_DEBUG_SERVER_PORT"
_MONARCH_DEBUG_SERVER_HOST_DEFAULT = "localhost"


def bind_address() -> tuple:
    """``(host, port)`` from Monarch's variables (port 0 or unset: a free one);
    ``ValueError`` naming a bad port."""
    host = os.environ.get(_MONARCH_DEBUG_SERVER_HOST_ENV_VAR, "").strip() or \
        _MONARCH_DEBUG_SERVER_HOST_DEFAULT
    raw = os.environ.get(_MONARCH_DEBUG_SERVER_PORT_ENV_VAR, "").strip()
    if not raw:
        return host, 0
    if not raw.isdigit() or not 0 <= int(raw) < 65536:
        raise ValueError(f"MONARCH_DEBUG_SERVER_PORT={raw!r} must be a port number "
                         "(1-65535, or 0 for a free one)")
    return host, int(raw)


class _RemoteIO:
    """A console's io over one remote client (see :mod:`.console`)."""

    def __init__(self, server: "DebugServer", ident: bytes) -> None:
        self.server, self.ident = server, ident
        self.lines = queue.Queue()
        self.closed = False
        self.seen = time.monotonic()

    def output(self, text: str) -> None:
        if not self.closed:
            self.server.send(self.ident, b"out", text)

    def input(self, prompt: str, idle=None) -> str | None:
        if prompt:
            self.output(prompt)
        while not self.closed:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if idle is not None and idle():
                    return None
                continue
            if line is None:
                break
            return line
        return None

    def close(self, reason: str = "") -> None:
        if not self.closed:
            self.closed = True
            if reason:
                self.server.send(self.ident, b"bye", reason)
            self.lines.put(None)
            from monarch_cy._debug.sessions import SESSIONS
            with SESSIONS.cond:
                SESSIONS.cond.notify_all()      # an attached console sees it


class DebugServer:
    """The debug endpoint of this job (one per controller process)."""

    def __init__(self, keys, rundir: str | None) -> None:
        import zmq
        from monarch_cy._transport.auth import ZAP_ENDPOINT
        self.keys = keys
        self.error = None
        self.ctx = zmq.Context()
        self.zap = self.ctx.socket(zmq.REP)
        self.zap.linger = 0
        self.zap.bind(ZAP_ENDPOINT)             # before any CURVE server socket
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.linger = 0
        keys.server(self.sock)
        host, port = bind_address()
        self.sock.bind(f"tcp://{host}:{port or '*'}")
        self.address = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        # A peer with another secret fails the CURVE handshake before ZAP: seen here.
        self.monitor = self.sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL |
            zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.bind(_OUT)
        self._tls = threading.local()
        self._client = None                     # the remote client's _RemoteIO
        self.path = None
        if rundir:
            self.path = os.path.join(rundir, DISCOVERY)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"address": self.address, "pid": os.getpid(),
                           "secret": keys.secret.hex()}, f)
        self.thread = threading.Thread(target=self._serve, name="monarch_cy-debug-server",
                                       daemon=True)
        self.thread.start()

    def send(self, ident: bytes, kind: bytes, text: str) -> None:
        """Queue a message to a client (from any thread)."""
        import zmq
        push = getattr(self._tls, "push", None)
        if push is None:
            push = self._tls.push = self.ctx.socket(zmq.PUSH)
            push.connect(_OUT)
        push.send_multipart([ident, kind, text.encode()])

    def _refused(self, peer: str) -> None:
        _log.warning("debug client from %s refused: it does not hold the job secret", peer)

    def _serve(self) -> None:
        import zmq
        poller = zmq.Poller()
        from zmq.utils.monitor import recv_monitor_message
        for s in (self.zap, self.sock, self.pull, self.monitor):
            poller.register(s, zmq.POLLIN)
        while True:
            try:
                events = dict(poller.poll(1000))
            except zmq.ZMQError:
                return
            if self.monitor in events:
                recv_monitor_message(self.monitor)
                self._refused(f"a peer of {self.address}")
            if self.zap in events:
                self.keys.handle_zap(self.zap, self._refused)
            while self.pull in events:
                try:
                    self.sock.send_multipart(self.pull.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    break
                except zmq.ZMQError:
                    pass                        # that client is gone
            while self.sock in events:
                try:
                    frames = self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._on_client(frames)
            c = self._client
            if c is not None and not c.closed and \
                    time.monotonic() - c.seen > CLIENT_TIMEOUT:
                c.close()                       # silent: gone (its console releases)

    def _on_client(self, frames: list) -> None:
        if len(frames) < 2:
            return
        ident, kind = frames[0], frames[1]
        text = frames[2].decode(errors="replace") if len(frames) > 2 else ""
        c = self._client
        if kind == b"hello":
            if c is not None and not c.closed:
                c.close("another debugger attached to this job")
            self._client = c = _RemoteIO(self, ident)
            from monarch_cy._debug.console import Console  # deferred: import time
            from monarch_cy._debug.sessions import SESSIONS
            threading.Thread(target=self._console, args=(Console(c, SESSIONS), c),
                             name="monarch_cy-debug-client", daemon=True).start()
            return
        if c is None or c.ident != ident or c.closed:
            return
        c.seen = time.monotonic()
        if kind == b"line":
            c.lines.put(text.rstrip("\n"))
        elif kind == b"bye":
            c.close()

    def _console(self, console, io) -> None:
        try:
            console.run()
        finally:
            io.close("the debugger session ended")
            push = getattr(self._tls, "push", None)
            if push is not None:
                push.close(linger=1000)


_server = None
_lock = threading.Lock()


def start():
    """This process's debug server, started once; None (and a warning) when it
    cannot bind (then only the controller's terminal can debug)."""
    global _server
    with _lock:
        if _server is None:
            from monarch_cy._actor.base import state
            node = state.get_node()
            try:
                _server = DebugServer(node.keys, getattr(node, "rundir", None))
            except Exception as e:  # noqa: BLE001 - the terminal's console still works
                _log.warning("cannot start the debug server for monarch-cy debug: %s", e)
                return None
        return _server
