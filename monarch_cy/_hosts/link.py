"""The controller's side of the agents: one thread (the hub) talks to every host.

:class:`Hub` owns a private zmq context (with its own ZAP handler), one DEALER per
listening agent (``attach_to_workers``) and at most one ROUTER that dialing agents
connect to (:meth:`Hub.listen`, used by SLURM and Kubernetes jobs).  Other threads
never touch its sockets: they queue callables (:meth:`Hub.command`).

:class:`RemoteHost` is one agent: its state (``connecting`` -> ``up`` -> ``lost``,
``failed`` when it never came up, ``closed`` once this controller said goodbye),
what it told us (hostname, address, free ports), and its live procs.  Procs started through it get a
:class:`RemoteProcHandle` (the launcher's :class:`ProcHandle` interface): their
exits come from the agent's EXIT reports, and when the host is lost every one of
them fails at once with the cause (``node.proc_failed``) in the node's pump -- the
same path as a local proc's death, so pending calls fail and supervision sees it.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import deque

from monarch_cy._actor.launch.launcher import ProcHandle
from monarch_cy._hosts import protocol as P
from monarch_cy._hosts.worker_address import endpoint_ip
from monarch_cy._hosts.remote_stacks import ANSWER_MARGIN_S, StackRequests
from monarch_cy._log import logger
from monarch_cy._errors import (HostError, HostLostError, HostRefusedError,
                                      HostUnreachableError)

__all__ = ["Hub", "RemoteHost", "RemoteProcHandle", "DialIn"]


class RemoteProcHandle(ProcHandle):
    """A proc started by an agent: ``kill()`` asks the agent; exits come from it."""

    def __init__(self, host: "RemoteHost", key: str) -> None:
        super().__init__()
        self.host, self.key = host, key

    def kill(self) -> None:
        host = self.host
        if self.returncode is None and host.state == "up":
            host.hub.command(lambda: host.hub.send(host, (P.KILL, self.key)))

    def _finish(self, node, code: int, cause: str | None, tries: int = 0) -> None:
        # In the node's pump.  spawn_procs sets _on_exit right after start_proc
        # returns; a death reported before that waits for it (briefly).
        if self.returncode is not None:
            return
        if cause is not None:
            node.proc_failed(self.key, cause)
        if self._on_exit is None and tries < 200:
            node.add_timer(0.01, lambda: self._finish(node, code, None, tries + 1))
            return
        self._started.set()
        self._exit(code)


class RemoteHost:
    """One agent seen from the controller (see the module docstring)."""

    def __init__(self, hub: "Hub", endpoint: str, deadline: float, keys=None) -> None:
        self.hub = hub
        self.endpoint = endpoint
        self.keys = keys             # the link's JobKeys (None: the node's)
        self.deadline = deadline
        self.state = "connecting"
        self.error = None
        self.info = None
        self.ready = threading.Event()
        self.last = time.monotonic()
        self.sock = self.mon = self.ident = None
        self.dropped = None          # when its connection dropped (None: connected)
        self.procs = {}              # key -> RemoteProcHandle
        self._lock = threading.Lock()
        self._free = deque()
        self._owned = {}             # proc key -> [ports]

    @property
    def name(self) -> str:
        h = self.info["hostname"] if self.info else None
        return f"host {h} ({self.endpoint})" if h else f"host {self.endpoint}"

    # -- addresses (called from any thread) -----------------------------------
    def _alloc(self, owner: str | None) -> str:
        ip = self.info["ip"]
        with self._lock:
            while True:      # agents on one machine report the same free ports
                if not self._free:
                    raise RuntimeError(f"{self.name} has no free port left in its "
                                       f"agent's --ports range {self._range()}; start "
                                       "the agent with a wider range")
                port = self._free.popleft()
                if self.hub.claim(ip, port):
                    break
            addr = f"tcp://{ip}:{port}"
            self._owned.setdefault(owner or addr, []).append(port)
            return addr

    def proc_addrs(self) -> tuple[str, str]:
        """``(key, direct address)`` for a new proc on this host; later actor
        addresses of that proc come from here too (``addresses.REMOTE_ALLOC``)."""
        from monarch_cy._actor.base import addresses
        key = self._alloc(None)
        daddr = self._alloc(key)
        addresses.REMOTE_ALLOC[key] = lambda tag: self._alloc(key)
        return key, daddr

    def start_proc(self, node, cfg: dict, env: dict, output=None) -> RemoteProcHandle:
        """Ask the agent to start a proc (returns at once).  ``output``: the
        controller's ``ProcOutput`` for it, fed with what the agent reads from the
        proc's fds 1 and 2 (None: the proc forwards its ``sys.stdout`` itself)."""
        key = cfg["addr"]
        h = RemoteProcHandle(self, key)
        h.output = output
        if output is not None:
            cfg = dict(cfg, capture=True)
        with self._lock:
            self.procs[key] = h
            state = self.state
        if state == "up":
            self.hub.command(lambda: self.hub.send(self, (P.SPAWN, key, cfg, env)))
        else:
            cause = f"{self.name} is not available: {self.error}"
            self.hub.command(lambda: self._proc_exited(key, -9, cause))
        return h

    def read_stacks(self, key: str, rank: int, timeout: float):
        """The stacks of proc ``key`` on this host, read by its agent with py-spy
        (blocks up to ``timeout`` + a margin): a ``ProcStacks``; raises the
        ``StackDumpError`` the agent met (:mod:`.remote_stacks`)."""
        from monarch_cy._stacks import ProcStacks  # deferred: only when asked
        hub = self.hub
        req, slot = hub.stacks.new()
        if self.state != "up":
            hub.stacks.forget(req)
            return ProcStacks(rank, None, self.name,
                              error=f"{self.name} is not available: {self.error}")
        hub.command(lambda: hub.send(self, (P.STACKS, req, key, rank, timeout)))
        if not slot[0].wait(timeout + ANSWER_MARGIN_S):
            hub.stacks.forget(req)
            return ProcStacks(rank, None, self.name, error=(
                f"its host's agent did not answer within {timeout + ANSWER_MARGIN_S:g} s"))
        if not slot[1]:
            raise slot[2]
        return slot[2]

    def _range(self) -> str:
        r = (self.info or {}).get("port_range")
        return f"{r[0]}-{r[1]}" if r else "(unknown)"

    # -- hub thread ----------------------------------------------------------
    def _proc_exited(self, key: str, code: int, cause: str | None = None) -> None:
        from monarch_cy._actor.base import addresses
        with self._lock:
            h = self.procs.pop(key, None)
            ports = self._owned.pop(key, [])
            if self.state == "up":
                self._free.extend(ports)
        if ports:
            self.hub.release(self.info["ip"], ports)
        addresses.REMOTE_ALLOC.pop(key, None)
        if h is not None:
            node = self.hub.node
            node.call_in_pump(lambda: h._finish(node, code, cause))

    def _up(self, info: dict) -> None:
        self.info = info
        if not info.get("ports"):
            self._down("failed", HostError(
                f"{self.name}: no free port in its agent's --ports range "
                f"{self._range()} on {info.get('ip')}: every one is in use; free some "
                "or start the agent with another --ports range"))
            return
        with self._lock:
            self._free.extend(info.get("ports", ()))
            self.state = "up"
        self.ready.set()

    def _down(self, state: str, error: Exception) -> None:
        """Failed to come up, or lost: every proc on it fails with the cause."""
        with self._lock:
            was = self.state
            self.state, self.error = state, error
            keys = list(self.procs)
        self.ready.set()
        if keys:
            # Every proc here is gone: drop the connections to them now, before the
            # first exit is handled (which tells the other live procs), so nothing
            # waits on a connection to a peer that is no more.
            self.hub.node.forget(keys)
        for key in keys:
            self._proc_exited(key, -9, f"{self.name} lost: {error}" if was == "up"
                              else str(error))


class DialIn:
    """Agents that dialed this controller's agent port, in arrival order."""

    def __init__(self, hub: "Hub", addr: str) -> None:
        self.hub, self.addr = hub, addr
        self.hosts = []
        self.cond = threading.Condition()

    def wait(self, n: int, timeout: float, abort=None) -> list:
        """The first ``n`` hosts, ordered by the rank they report (then arrival).

        ``abort()`` is polled; a non-None return (a message) or the timeout raises."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.hosts) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HostUnreachableError(
                        f"only {len(self.hosts)} of {n} agents dialed {self.addr} within "
                        f"{timeout:.0f} s: can the nodes reach that address? (their "
                        "agents log the address they tried; MONARCH_CY_HOST or "
                        "MONARCH_CY_CONTROLLER_INTERFACE choose another)")
                self.cond.wait(min(left, 0.2))
                if abort is not None:
                    msg = abort()
                    if msg is not None:
                        raise msg if isinstance(msg, Exception) else RuntimeError(msg)
            got = list(self.hosts[:n])
        order = sorted(range(n), key=lambda i: (got[i].info.get("rank") is None,
                                                got[i].info.get("rank") or 0, i))
        return [got[i] for i in order]


class Hub:
    """The thread talking to every agent of this controller (module docstring)."""

    def __init__(self, node) -> None:
        import zmq
        from monarch_cy._transport.auth import ZAP_ENDPOINT
        self.zmq = zmq
        self.node = node
        self.keys = node.keys
        self.timeout = P.host_timeout()
        self.ctx = zmq.Context()
        self.zap = self.ctx.socket(zmq.REP)
        self.zap.bind(ZAP_ENDPOINT)
        self.poller = zmq.Poller()
        self.poller.register(self.zap, zmq.POLLIN)
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.poller.register(self._wake, zmq.POLLIN)
        self._cmds = deque()
        self._claimed = set()            # (ip, port) handed to a proc of any host
        self._claimed_lock = threading.Lock()
        self.stacks = StackRequests()    # dump_stacks of procs on the hosts
        self.hosts = []
        self.by_sock = {}
        self.router = None
        self.dialin = None
        self.by_ident = {}
        self._closed = False
        self.thread = threading.Thread(target=self._loop, name="monarch_cy-hosts",
                                       daemon=True)
        self.thread.start()

    # -- any thread ----------------------------------------------------------
    def command(self, fn) -> None:
        self._cmds.append(fn)
        try:
            os.eventfd_write(self._wake, 1)
        except OSError:
            pass

    def call(self, fn, timeout: float = 10.0):
        """Run ``fn()`` in the hub thread and return its result."""
        box, done = [], threading.Event()

        def run():
            try:
                box.append((True, fn()))
            except BaseException as e:
                box.append((False, e))
            done.set()
        self.command(run)
        if not done.wait(timeout):
            raise TimeoutError("the host link thread did not answer")
        ok, v = box[0]
        if not ok:
            raise v
        return v

    def connect(self, endpoint: str, timeout: float, keys=None) -> RemoteHost:
        """Start connecting to a listening agent (``tcp://`` or ``ipc://``); returns its
        host at once.  ``keys``: the secret the agent holds (default: the node's)."""
        host = RemoteHost(self, endpoint, time.monotonic() + timeout, keys)
        self.command(lambda: self._open(host))
        return host

    def claim(self, ip: str, port: int) -> bool:
        """Take ``port`` of ``ip`` for a proc unless a proc of another host of this
        controller has it (several agents on one machine offer the same ports)."""
        with self._claimed_lock:
            if (ip, port) in self._claimed:
                return False
            self._claimed.add((ip, port))
            return True

    def release(self, ip: str, ports) -> None:
        with self._claimed_lock:
            self._claimed.difference_update((ip, p) for p in ports)

    def listen(self, bind: str) -> DialIn:
        """Bind the port dialing agents connect to (once per controller)."""
        return self.call(lambda: self._listen(bind))

    # -- hub thread ----------------------------------------------------------
    def send(self, host: RemoteHost, msg: tuple) -> None:
        zmq = self.zmq
        try:
            if host.ident is not None:
                self.router.send_multipart([host.ident, P.dumps(msg)], zmq.NOBLOCK)
            elif host.sock is not None:
                host.sock.send(P.dumps(msg), zmq.NOBLOCK)
        except (zmq.Again, zmq.ZMQError):
            pass

    def _open(self, host: RemoteHost) -> None:
        zmq = self.zmq
        self.hosts.append(host)
        try:
            ip = endpoint_ip(host.endpoint)
        except ValueError as e:
            host._down("failed", HostUnreachableError(f"agent {host.endpoint}: {e}"))
            return
        s = self.ctx.socket(zmq.DEALER)
        s.linger = 0
        (host.keys or self.keys).client(s)
        host.sock, host.mon = s, P.Monitor(s, host.endpoint)
        s.connect(host.endpoint)
        self.by_sock[s] = host
        self.by_sock[host.mon.sock] = host
        self.poller.register(s, zmq.POLLIN)
        self.poller.register(host.mon.sock, zmq.POLLIN)
        self.send(host, (P.HELLO, self._hello(ip)))

    def _hello(self, ip: str | None) -> dict:
        """The controller's HELLO: the address the agent was reached at, the heartbeat
        timeout, and the runtime addresses its procs must reach (the agent checks)."""
        return {"ip": ip, "timeout": self.timeout,
                "controller": [self.node.addr, self.node.direct_addr]}

    def _close_sock(self, host: RemoteHost) -> None:
        for s in (host.sock, host.mon.sock if host.mon else None):
            if s is not None:
                self.by_sock.pop(s, None)
                self.poller.unregister(s)
                s.close(linger=0)
        host.sock = host.mon = None

    def _listen(self, bind: str) -> DialIn:
        zmq = self.zmq
        if self.router is not None:
            raise RuntimeError(f"this controller already listens for agents on "
                               f"{self.dialin.addr}")
        if bind.startswith("tcp://") and bind.endswith(":0"):
            # any port: the first free one of MONARCH_CY_CONTROLLER_PORTS, if set
            from monarch_cy._actor.base.addresses import listen_port
            host = bind[6:-2]
            bind = f"tcp://{host}:{listen_port(host.strip('[]'))}"
        P.parse_tcp(bind, "agent port address")
        r = self.ctx.socket(zmq.ROUTER)
        r.linger = 500
        self.keys.server(r)
        mon = P.Monitor(r, bind, server=True)
        try:
            r.bind(bind)
        except zmq.ZMQError as e:
            mon.close()
            r.close(linger=0)
            raise OSError(e.errno, f"cannot listen for agents on {bind}: {e.strerror}"
                          ) from None
        self.rmon = mon
        self.router = r
        self.dialin = DialIn(self, r.getsockopt(zmq.LAST_ENDPOINT).decode())
        self.poller.register(r, zmq.POLLIN)
        self.poller.register(self.rmon.sock, zmq.POLLIN)
        return self.dialin

    def _on_msg(self, host: RemoteHost, msg: tuple) -> None:
        host.last = time.monotonic()
        kind = msg[0]
        if kind == P.HELLO:
            if host.state == "connecting":
                host._up(msg[1])
                if host.state == "failed":      # refused in _up: let the agent go
                    self.send(host, (P.BYE,))
                    self._close_sock(host)
        elif kind == P.STARTED:
            h = host.procs.get(msg[1])
            if h is not None:
                h.pid = msg[2]
                h._started.set()
        elif kind == P.OUTPUT:
            h = host.procs.get(msg[1])
            out = h.output if h is not None else None
            if out is not None:          # in the pump, in order, before its EXIT
                _, _, stream, data = msg
                self.node.call_in_pump(lambda: out.feed(stream, data))
        elif kind == P.STACKS:
            self.stacks.answer(msg[1], msg[2], msg[3])
        elif kind == P.EXIT:
            host._proc_exited(msg[1], msg[2])
        elif kind == P.ERROR:
            host._proc_exited(msg[1], -1, f"{host.name}: {msg[2]}")
        elif kind == P.BYE and host.state == "up":
            self._lose(host, "its agent stopped")

    def _lose(self, host: RemoteHost, why: str) -> None:
        if host.state != "up":
            return
        # an agent that stopped as asked, with nothing of ours on it, is routine
        quiet = why == "its agent stopped" and not host.procs
        (P.log.info if quiet else P.log.warning)("%s lost: %s", host.name, why)
        if host.sock is not None:
            self._close_sock(host)
        host._down("lost", HostLostError(f"{host.name}: {why}"))

    def _router_msg(self, frames) -> None:
        ident, data = frames[0], frames[-1]
        try:
            msg = P.loads(data)
        except Exception as e:
            P.log.error("bad message from a dialing agent: %s", e)
            return
        host = self.by_ident.get(ident)
        if host is None:
            if msg[0] != P.HELLO:
                return
            info = msg[1]
            host = RemoteHost(self, f"tcp://{info['ip']} (dialed in)", 0.0)
            host.ident = ident
            self.by_ident[ident] = host
            self.hosts.append(host)
            host._up(info)
            self.send(host, (P.HELLO, self._hello(None)))
            if host.state == "failed":          # refused in _up: let the agent go
                self.send(host, (P.BYE,))
            with self.dialin.cond:
                self.dialin.hosts.append(host)
                self.dialin.cond.notify_all()
            return
        self._on_msg(host, msg)

    def _tick(self, now: float) -> None:
        for host in list(self.hosts):
            if host.state == "up":
                self.send(host, (P.HB,))
                if now - host.last > self.timeout:
                    self._lose(host, (
                        "its connection dropped (agent killed or host down) and did "
                        f"not come back within {self.timeout:.1f} s"
                        if host.dropped is not None else
                        f"no heartbeat for {self.timeout:.1f} s"))
            elif host.state == "connecting" and now > host.deadline:
                mon = host.mon
                ipc = host.endpoint.startswith("ipc://")
                seen = (("connected" if ipc else "TCP connected") +
                        " but no answer: is it a monarch_cy agent?"
                        if mon is not None and mon.connected else
                        "no connection: no socket at that path, or the worker is not "
                        "running" if ipc else
                        "no TCP connection: wrong address, agent not running, or a "
                        "firewall")
                self._close_sock(host)
                host._down("failed", HostUnreachableError(
                    f"attach failed: config push failed during attach: agent "
                    f"{host.endpoint} did not answer within "
                    f"{host.deadline - host.last:.1f} s ({seen})"))

    def _loop(self) -> None:
        zmq = self.zmq
        hb = self.timeout / 5
        last = 0.0
        while not self._closed:
            try:
                events = self.poller.poll(int(hb * 1000))
            except zmq.ZMQError:
                if self._closed:
                    return
                raise
            for s, _ in events:
                try:
                    self._event(s)
                except Exception:
                    logger("hosts").exception("handling a host agent's message failed")
            while self._cmds:
                try:
                    self._cmds.popleft()()
                except Exception:
                    logger("hosts").exception("a host link command failed")
            now = time.monotonic()
            P.REFUSALS.flush()
            if now - last >= hb:
                last = now
                self._tick(now)

    def _event(self, s) -> None:
        zmq = self.zmq
        if s == self._wake:
            try:
                os.eventfd_read(self._wake)
            except BlockingIOError:
                pass
        elif s is self.zap:
            self.keys.handle_zap(self.zap, P.log_refusal)
        elif s is self.router:
            while True:
                try:
                    self._router_msg(self.router.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    return
        elif self.router is not None and s is self.rmon.sock:
            self.rmon.drain()
        else:
            host = self.by_sock.get(s)
            if host is None:
                return
            if s is host.sock:
                while host.sock is not None:
                    try:
                        data = host.sock.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        return
                    self._on_msg(host, P.loads(data))
            else:
                for ev in host.mon.drain():
                    if ev == "refused" and host.state == "connecting":
                        self._close_sock(host)
                        host._down("failed", HostRefusedError(
                            f"agent {host.endpoint} refused the CURVE handshake: it "
                            "holds a different job secret"))
                        return
                    if ev == "down" and host.state == "up":
                        # zmq reconnects by itself: the host is lost only if nothing
                        # comes from it for the heartbeat timeout (_tick), as a peer
                        # that is merely slow would be
                        host.dropped = time.monotonic()
                    elif ev == "up":
                        host.dropped = None

    def close(self, timeout: float = 2.0) -> None:
        """Say goodbye to every agent (they kill this controller's procs) and stop."""
        if self._closed:
            return

        def bye():
            for h in self.hosts:
                if h.state == "up":
                    self.send(h, (P.BYE,))
                    h.state = "closed"      # its agent leaving now is no loss
        try:
            self.call(bye, timeout)
        except Exception:
            pass
        time.sleep(0.05)       # let the BYEs leave (linger below covers the rest)
        self._closed = True
        self.command(lambda: None)
        self.thread.join(timeout)
        for h in self.hosts:
            for s in (h.sock, h.mon.sock if h.mon else None):
                if s is not None:
                    s.close(linger=200)
        for s in (self.router, getattr(self, "rmon", None) and self.rmon.sock, self.zap):
            if s is not None:
                s.close(linger=200)
        self.ctx.term()
        os.close(self._wake)
        P.REFUSALS.flush(force=True)


def local_hostname() -> str:
    return socket.gethostname()
