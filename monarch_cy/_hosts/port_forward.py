"""``PortForwarder``: TCP ports of one proc mesh forwarded to the procs of another.

Spawn one on the client (``this_proc().spawn("fwd", PortForwarder)``) and call
``forward.call_one(dst_proc_mesh, dst_port, src_proc_mesh, src_address)`` for each
forward: every proc of ``src_proc_mesh`` listens on ``src_address``
(``"address:port"``) and each connection made there is relayed to
``127.0.0.1:dst_port`` on the proc of ``dst_proc_mesh`` at the same point.  The two
meshes must have the same shape; ``dst_port`` and ``src_address`` may be functions
of the :class:`Point` (called on the proc that uses them).  Several source procs may
share one address (``SO_REUSEPORT``: the kernel spreads connections over them).

Semantics:

* **Set-up** (``forward``) is all or nothing: it spawns a destination actor per
  ``dst_proc_mesh`` proc, which checks that something listens on ``dst_port`` there
  (read from ``/proc/net/tcp*``: no connection is made to the service), then a
  source actor per ``src_proc_mesh`` proc, which binds and listens.  Any failure
  (shapes, a bad port or address, nothing listening, an address in use) stops the
  actors already spawned, so no port stays bound, and the call fails with
  :class:`ActorError` wrapping a ``ValueError``/``OSError`` that names the value.
  When ``forward`` returns, every source is listening.
* **A connection** is accepted by the source, which asks its destination to connect
  to the service; bytes flow both ways as a :class:`~.byte_stream.StreamEnd` pair,
  in order, with backpressure (at most 4 MiB in flight each way: a slow service
  slows the client's writes, nothing is buffered without bound).  A half close
  (EOF) on either side is passed on as a half close; the connection ends once both
  directions have ended.  An abrupt end on either side (a reset, an error, the
  service refusing the connection) resets the other side's socket.
* **stop()** of the ``PortForwarder`` (idempotent) stops every forward it made (their
  actors are its children, stopped before it): each listener is closed before
  ``stop()`` returns (new connections are refused), and every open connection is
  reset, even one stuck behind a peer that does not read.  Stopping the procs of
  either mesh ends the forwards on them.

The actors live in the procs' asyncio loops; sockets are closed by the actor that
opened or accepted them, and each stream's receiver by its relay.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid

from monarch_cy._actor.base.shape import Point
from monarch_cy._actor.meshes.proc_mesh import ProcMesh
from monarch_cy._actor.model.actor import Actor, current_rank
from monarch_cy._actor.model.endpoint import endpoint
from monarch_cy._actor.model.ports import Channel
from monarch_cy._hosts.byte_stream import CHUNK, StreamEnd
from monarch_cy._log import logger

__all__ = ["PortForwarder"]

_HOST = "127.0.0.1"
_CLOSE_TIMEOUT = 1.0
_log = logger("port_forward")


# -- values -------------------------------------------------------------------------

def _check_port(name: str, port) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"{name} must be a TCP port from 1 through 65535, not {port!r}")
    return port


def _parse_address(address) -> tuple[str, int]:
    """``"host:port"`` (``"[v6]:port"`` too) -> ``(host, port)``."""
    if not isinstance(address, str):
        raise ValueError(f"src_address must be a string 'address:port', not {address!r}")
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ValueError(f"src_address must look like 'address:port', not {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"src_address {address!r}: the port {port!r} is not a "
                         "number") from None
    _check_port(f"src_address {address!r}: the port", number)
    return host, number


def _at_point(value, point: Point):
    return value(point) if callable(value) else value


def _listening(port: int) -> bool | None:
    """Whether a TCP socket listens where ``127.0.0.1:port`` reaches it (read from
    ``/proc/net/tcp`` and ``tcp6``; None where they cannot be read)."""
    v4 = {"0100007F", "00000000"} if struct.pack("=I", 1)[0] == 1 else {"7F000001",
                                                                         "00000000"}
    v6 = {"0" * 32, "0000000000000000FFFF00000100007F"}
    found_any = False
    for path, addrs in (("/proc/net/tcp", v4), ("/proc/net/tcp6", v6)):
        try:
            with open(path) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        found_any = True
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != "0A":          # 0A: LISTEN
                continue
            addr, _, hexport = fields[1].partition(":")
            if int(hexport, 16) == port and addr.upper() in addrs:
                return True
    return False if found_any else None


# -- one connection -----------------------------------------------------------------

def _reset(writer: asyncio.StreamWriter) -> None:
    """Close ``writer``'s socket with a TCP reset (its peer sees an abrupt end)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), _CLOSE_TIMEOUT)
    except (OSError, asyncio.TimeoutError):
        writer.transport.abort()


async def _relay(end: StreamEnd, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, connections: "_Connections") -> None:
    """Relay one socket through ``end`` until both directions ended; reset the socket
    (and tell the other end) on any failure or cancellation."""

    async def write(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    async def write_eof() -> None:
        if writer.can_write_eof():
            writer.write_eof()
            await writer.drain()

    connections.open[writer] = end
    end.start(write, write_eof)
    pump = asyncio.ensure_future(end.pump(lambda: reader.read(CHUNK)))
    try:
        await asyncio.gather(pump, end.sink_done())
    except asyncio.CancelledError:
        end.abort("port forward stopped")
        _reset(writer)
        raise
    except Exception as e:  # noqa: BLE001 - any failure of either side resets both
        end.abort(f"{type(e).__name__}: {e}")
        _reset(writer)
    else:
        await _close(writer)
    finally:
        connections.open.pop(writer, None)
        pump.cancel()
        await asyncio.gather(pump, return_exceptions=True)
        await end.close()


class _Connections:
    """One actor's connections: their tasks, and the sockets and streams open."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()
        self.open: dict = {}            # writer -> its StreamEnd (None: not yet)

    def add(self, coro) -> None:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def reset_all(self) -> None:
        """Reset every socket and tell every other end (in the actor's loop)."""
        for writer, end in list(self.open.items()):
            if end is not None:
                end.tell_abort("port forward stopped")
            _reset(writer)
        self.open.clear()

    async def close(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _cleanup(loop, connections: _Connections, server=None) -> None:
    """An actor's ``__cleanup__``: close the listener, reset every connection.

    The listener is closed here and now, so ``stop()`` returns with the address
    refusing connections.  monarch_cy runs ``__cleanup__`` on a helper thread with a
    loop of its own while the actor's thread waits, then cancels the tasks of the
    actor's loop: the resets are then handed to the actor's loop, where they run
    first, before the cancelled relays end.  On the actor's own loop, they run here
    and the relays are cancelled and awaited."""
    if server is not None:
        server.close()
    if loop is None:                       # never started: nothing is open
        return
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    if here is loop:
        connections.reset_all()
        await connections.close()
        return
    try:
        loop.call_soon_threadsafe(connections.reset_all)
    except RuntimeError:                   # the actor's loop is closed: so are they
        pass


# -- the two sides --------------------------------------------------------------------

class _ForwardDestination(Actor):
    """Connects to the service at ``127.0.0.1:dst_port`` for each forwarded connection."""

    def __init__(self) -> None:
        self._port: int | None = None
        self._loop = None
        self._connections = _Connections()

    @endpoint
    async def configure(self, dst_port) -> None:
        self._loop = asyncio.get_running_loop()
        point = current_rank()
        port = _at_point(dst_port, point)
        name = "dst_port" if not callable(dst_port) else f"dst_port at {dict(point)}"
        _check_port(name, port)
        if _listening(port) is False:
            raise ConnectionRefusedError(
                f"{name}: nothing listens on {_HOST}:{port} on host "
                f"{socket.gethostname()} (start the service before forwarding to it)")
        self._port = port

    @endpoint
    async def open(self, peer):
        """Connect to the service; return this side's port of the stream."""
        if self._port is None:
            raise RuntimeError("this port-forward destination was never configured")
        try:
            reader, writer = await asyncio.open_connection(_HOST, self._port)
        except OSError as e:
            raise type(e)(e.errno, f"dst_port {self._port}: cannot connect to "
                                   f"{_HOST}:{self._port} on host "
                                   f"{socket.gethostname()}: {e.strerror or e}") from None
        port, inbox = Channel.open()
        self._connections.add(_relay(StreamEnd(peer, inbox), reader, writer,
                                     self._connections))
        return port

    async def __cleanup__(self, exc) -> None:
        await _cleanup(self._loop, self._connections)


class _ForwardSource(Actor):
    """Listens on ``src_address``; relays each accepted connection to its destination."""

    def __init__(self) -> None:
        self._server: asyncio.AbstractServer | None = None
        self._loop = None
        self._destination = None
        self._where = ""
        self._connections = _Connections()

    @endpoint
    async def start(self, destination, src_address) -> None:
        self._loop = asyncio.get_running_loop()
        point = current_rank()
        host, port = _parse_address(_at_point(src_address, point))
        self._destination = destination.slice(**dict(point)) if len(point) else destination
        self._where = f"{host}:{port}"
        try:
            self._server = await asyncio.start_server(
                lambda r, w: self._connections.add(self._accepted(r, w)), host, port,
                reuse_port=True)
        except OSError as e:
            raise OSError(e.errno, f"src_address {self._where!r}: cannot listen there: "
                                   f"{e.strerror or e}") from None

    async def _accepted(self, reader, writer) -> None:
        """One accepted connection, from asking the destination to connect to the
        end of the relay (a task of ``self._connections``: stop cancels it)."""
        self._connections.open[writer] = None
        port, inbox = Channel.open()
        try:
            peer = await self._destination.open.call_one(port)
        except asyncio.CancelledError:
            inbox.close()
            _reset(writer)
            raise
        except Exception as e:  # noqa: BLE001 - the client sees a reset; the log says why
            inbox.close()
            lines = [ln for ln in str(e).splitlines() if ln.strip()]
            _log.warning("port forward from %s: connection reset: %s", self._where,
                         lines[-1].strip() if lines else type(e).__name__)
            _reset(writer)
            return
        finally:
            self._connections.open.pop(writer, None)
        await _relay(StreamEnd(peer, inbox), reader, writer, self._connections)

    async def __cleanup__(self, exc) -> None:
        server, self._server = self._server, None
        await _cleanup(self._loop, self._connections, server)


# -- the public actor -----------------------------------------------------------------

class PortForwarder(Actor):
    """Owns point-to-point TCP port forwards; ``stop()`` closes all of them.

    Spawn it on the client's proc, call :meth:`forward` once per forward (see the
    module docstring for the semantics)."""

    @endpoint
    async def forward(self, dst_proc_mesh, dst_port, src_proc_mesh, src_address) -> None:
        """Listen on ``src_address`` on each proc of ``src_proc_mesh`` and relay each
        connection to ``127.0.0.1:dst_port`` on the proc of ``dst_proc_mesh`` at the
        same point.  ``dst_port``: an int, or a function of the Point giving one;
        ``src_address``: ``"address:port"``, or a function of the Point giving one.
        Returns once every source listens; on failure nothing stays running."""
        for name, mesh in (("dst_proc_mesh", dst_proc_mesh),
                           ("src_proc_mesh", src_proc_mesh)):
            if not isinstance(mesh, ProcMesh):
                raise TypeError(f"{name} must be a ProcMesh, not {mesh!r}")
        if dst_proc_mesh.extent != src_proc_mesh.extent:
            raise ValueError(
                "dst_proc_mesh and src_proc_mesh must have the same shape: "
                f"{dst_proc_mesh.extent} != {src_proc_mesh.extent}")
        if not callable(dst_port):
            _check_port("dst_port", dst_port)
        if not callable(src_address):
            _parse_address(src_address)
        tag = uuid.uuid4().hex[:12]
        spawned = []
        try:
            destination = dst_proc_mesh.spawn(f"port_forward_dst_{tag}", _ForwardDestination)
            spawned.append(destination)
            await destination.configure.call(dst_port)
            source = src_proc_mesh.spawn(f"port_forward_src_{tag}", _ForwardSource)
            spawned.insert(0, source)
            await source.start.call(destination, src_address)
        except BaseException as e:
            failures = await _stop_all(spawned)
            if failures:
                e.add_note("stopping the port forward's actors failed: " + "; ".join(
                    f"{type(f).__name__}: {f}" for f in failures))
            raise



async def _stop_all(meshes) -> list:
    """Stop ``meshes`` in order (sources before destinations); the errors met."""
    failures = []
    for mesh in meshes:
        try:
            await mesh.stop()
        except Exception as e:  # noqa: BLE001 - stop the others; the caller reports
            failures.append(e)
    return failures
