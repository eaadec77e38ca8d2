"""The host agent: starts and supervises procs on one machine for a remote controller.

Run one per host (``python -m monarch_cy._hosts.agent``, or the console command)::

    MONARCH_CY_JOB_SECRET_FILE=~/.mcy/job.secret \\
        python -m monarch_cy._hosts.agent --listen tcp://0.0.0.0:26600
    python -m monarch_cy._hosts.agent --connect tcp://controller:26600 --once

* ``--listen ADDR``: wait for controllers (``attach_to_workers``) to connect;
* ``--connect ADDR``: dial the controller (SLURM, Kubernetes); exits if the
  controller does not answer within ``--connect-timeout`` or refuses the handshake.

``--listen tcp://HOST:0`` picks a free port; ``--address-file PATH`` receives the
bound address once listening.  ``--owner-pid PID``: exit when the agent's parent is
no longer PID (``ProcessJob``'s owned agents); ``SIGUSR1`` stops that watch (the job
was cached and must outlive its controller).

The job secret comes from ``--secret-file`` / ``MONARCH_CY_JOB_SECRET_FILE`` /
``MONARCH_CY_JOB_SECRET`` (:mod:`.secret`), else this user's secret
(:mod:`monarch_cy._transport.user_secret`), never the command line; it is removed
from the environment the procs get (they receive it through their stdin pipe, as
local procs do).  Peers without it fail the CURVE handshake and are logged; nothing
they send is read.

Procs are forked by a zygote (:mod:`monarch_cy._actor.launch.launcher`) owned by the agent;
each proc watches the agent's pid and exits when the agent dies.  What a proc writes
to its fds 1 and 2 is read here and sent to its controller (:mod:`.proc_capture`);
its stacks are read here with py-spy when the controller asks
(:mod:`.remote_stacks`).  The agent reports every start and exit to the controller
that asked, and kills that controller's procs when it says goodbye or is lost (no
message for the heartbeat timeout, see :mod:`.protocol`).  ``--once``: exit after the first controller is gone.  SIGTERM /
SIGINT, or a controller shutting down the host mesh that owns this host
(``HostMesh.shutdown()``): kill every proc, then exit (status 0 for the latter).

Procs bind ports from ``--ports A-B`` (default 26601-27600) on the advertised address
(``--advertise``, else the address the controller reached / the route to it); a
range with no free port fails the host at the controller, naming the range.

Procs reply to the controller's runtime addresses, which the controller sends in its
HELLO.  Before the first proc for a controller, the agent checks with a plain TCP
connection that this host reaches each of them; when one does not answer, every
proc requested by that controller fails at once with an ``ERROR`` naming the
``address:port`` tried and why (refused, no route, no answer within a second or
so), instead of starting procs that cannot report back.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time

from monarch_cy import _config
from monarch_cy._hosts import protocol as P
from monarch_cy._hosts.proc_capture import OutputRelay
from monarch_cy._hosts.remote_stacks import AgentStacks
from monarch_cy._transport.secret import ENV, ENV_FILE, default_secret

_HELLO_EVERY_S = 0.5     # a dialing agent's HELLO repeats this often until answered

__all__ = ["Agent", "main"]

log = P.log


class _Ctl:
    """One controller the agent serves."""

    def __init__(self, ident: bytes, timeout: float, reach=()) -> None:
        self.ident = ident
        self.timeout = timeout
        self.last = time.monotonic()
        self.procs = set()
        self.reach = list(reach)     # the controller's runtime addresses (its HELLO)
        self.unreachable = None      # None: not checked yet; "": reached; else why not


class Agent:
    """See the module docstring.  ``run()`` returns the exit status."""

    def __init__(self, secret: bytes, *, listen: str | None = None,
                 connect: str | None = None, ports=P.DEFAULT_PROC_PORTS,
                 advertise: str | None = None, rank: int | None = None,
                 once: bool = False, connect_timeout: float = 60.0,
                 owner_pid: int | None = None, listen_fd: int | None = None) -> None:
        import zmq
        from monarch_cy._transport.auth import ZAP_ENDPOINT, JobKeys
        if (listen is None) == (connect is None):
            raise ValueError("give exactly one of --listen and --connect")
        self.keys = JobKeys(secret)
        self.zmq = zmq
        self.listen, self.connect = listen, connect
        self.ports = ports
        self.advertise = advertise
        self.rank = rank
        self.once = once
        self.connect_timeout = connect_timeout
        self.owner_pid = owner_pid   # exit when this parent is gone (None: never)
        self.ctx = zmq.Context()
        self.zap = self.ctx.socket(zmq.REP)
        self.zap.bind(ZAP_ENDPOINT)
        if listen:
            self.sock = self.ctx.socket(zmq.ROUTER)
            self.keys.server(self.sock)
            self.mon = P.Monitor(self.sock, listen, server=True)
            try:
                listen = self.listen = self._bind(listen, listen_fd)
            except BaseException:
                self.mon.close()
                self.sock.close(linger=0)
                self.zap.close(linger=0)
                self.ctx.term()
                raise
        else:
            host, _ = P.parse_tcp(connect, "--connect address")
            self.sock = self.ctx.socket(zmq.DEALER)
            self.sock.setsockopt(zmq.IMMEDIATE, 1)
            self.keys.client(self.sock)
            self.mon = P.Monitor(self.sock, connect)
            self.sock.connect(connect)
            self._peer_host = host
        self.sock.linger = 1000
        self.ctls = {}           # ident -> _Ctl
        self.handles = {}        # proc key -> (ident, ProcHandle)
        self.kill_when_started = set()
        self.unreported = {}     # proc key -> handle whose start is not yet reported
        self.zygote = None
        self.rundir = tempfile.mkdtemp(prefix="mcy-agent-")
        self.served = 0
        self.shutdown = False        # a controller shut this host down: exit
        self.t0 = time.monotonic()

    def _bind(self, listen: str, fd: int | None) -> str:
        """Bind the ROUTER; returns the address controllers dial.  ``listen``:
        ``tcp://HOST:PORT`` (``:0``: any free port), ``ipc://PATH`` (procs then bind
        loopback ports), or ``tcp://HOST`` with ``fd``: the listening socket this
        process inherited (zmq takes it over)."""
        zmq = self.zmq
        if listen.startswith("ipc://"):
            if self.advertise is None:
                self.advertise = "127.0.0.1"      # a Unix socket: this machine only
            try:
                self.sock.bind(listen)
            except zmq.ZMQError as e:
                raise OSError(e.errno, f"cannot listen on {listen}: {e.strerror}") from None
            return listen
        if fd is not None:
            host, port = _adopt_fd(fd, listen)
            self.sock.setsockopt(zmq.USE_FD, fd)
            self.sock.bind(f"tcp://{host}:{port}")
            return f"tcp://{host}:{port}"
        host, port = _parse_listen(listen)
        if port == 0:            # any free port: the bound address is reported
            self.sock.bind(f"tcp://{host}:*")
            return self.sock.getsockopt_string(zmq.LAST_ENDPOINT).replace("0.0.0.0", host)
        self.sock.bind(listen)
        return listen

    # -- helpers -------------------------------------------------------------
    def _send(self, ident: bytes, msg: tuple) -> None:
        try:
            if self.listen:
                self.sock.send_multipart([ident, P.dumps(msg)], self.zmq.NOBLOCK)
            else:
                self.sock.send(P.dumps(msg), self.zmq.NOBLOCK)
        except self.zmq.Again:
            pass

    def _info(self, ip_hint: str | None) -> dict:
        ip = self.advertise or ip_hint
        if ip is None and self.connect:
            ip = P.local_ip_towards(self._peer_host)
        if ip is None:
            ip = socket.gethostbyname(socket.gethostname())
        return {"hostname": socket.gethostname(), "ip": ip, "pid": os.getpid(),
                "rank": self.rank, "ports": _free_ports(ip, self.ports),
                "port_range": list(self.ports), "python": sys.executable}

    def _zygote(self):
        if self.zygote is None:
            from monarch_cy._actor.launch.launcher import _Zygote
            self.zygote = _Zygote()
            self.poller.register(self.zygote.status_fd, self.zmq.POLLIN)
        return self.zygote

    # -- messages ------------------------------------------------------------
    def _handle(self, ident: bytes, msg: tuple) -> None:
        kind = msg[0]
        ctl = self.ctls.get(ident)
        if kind == P.HELLO:
            if ctl is None:
                ctl = self.ctls[ident] = _Ctl(ident, float(msg[1].get("timeout", 10)),
                                              msg[1].get("controller", ()))
                self.served += 1
                log.info("controller connected (heartbeat timeout %.1f s)", ctl.timeout)
            self._send(ident, (P.HELLO, self._info(msg[1].get("ip"))))
            return
        if ctl is None:
            return                     # a controller we already counted lost
        ctl.last = time.monotonic()
        if kind == P.SPAWN:
            _, key, cfg, env = msg
            self._spawn(ctl, key, cfg, env)
        elif kind == P.KILL:
            self._kill(msg[1])
        elif kind == P.STACKS:           # only a proc this controller started here
            _, req, key, rank, timeout = msg
            ent = self.handles.get(key)
            pid = ent[1].pid if ent is not None and ent[0] == ident else None
            self.stacks.request(ident, req, pid, int(rank), min(max(float(timeout), 0.1), 120.0))
        elif kind == P.BYE:
            self._drop(ctl, "said goodbye")
        elif kind == P.SHUTDOWN:
            log.info("the controller shut this host down; stopping")
            self._drop(ctl, "shut this host down")
            self.shutdown = True

    def _spawn(self, ctl: _Ctl, key: str, cfg: dict, env: dict) -> None:
        if ctl.unreachable is None:
            ctl.unreachable = _unreachable(ctl.reach, min(3.0, max(0.5, ctl.timeout / 4)))
            if ctl.unreachable:
                log.error("%s", ctl.unreachable)
        if ctl.unreachable:
            self._send(ctl.ident, (P.ERROR, key, f"cannot start a proc: "
                                                 f"{ctl.unreachable}"))
            return
        full = {k: v for k, v in os.environ.items() if k not in (ENV, ENV_FILE)}
        env = dict(env)
        coord = env.pop("MONARCH_CY_GPU_COORD", None)
        full.update(env)
        if coord is not None:       # index the GPUs this host's agent was given
            from monarch_cy._actor.launch.visible_gpus import assignment
            try:
                full.update(assignment(full, int(coord)))
            except ValueError as e:
                self._send(ctl.ident, (P.ERROR, key, f"cannot start a proc: {e}"))
                return
        cfg = dict(cfg, controller_pid=os.getpid(), rundir=self.rundir)
        if cfg.pop("capture", False):   # its fds 1 and 2, read here, sent to ctl
            cfg["stdio"] = self.output.open(key, ctl.ident)
        try:
            h = self._zygote().fork(cfg, full)
        except Exception as e:       # zygote gone or broken pipe
            self.zygote = None
            self.output.drop(key)
            self._send(ctl.ident, (P.ERROR, key, f"cannot start a proc: {e}"))
            return
        ctl.procs.add(key)
        self.handles[key] = (ctl.ident, h)
        self.unreported[key] = h
        h._on_exit = lambda code, key=key: self._exited(key, code)

    def _exited(self, key: str, code: int) -> None:
        self.output.at_exit(key)        # its last lines go before its exit
        ent = self.handles.pop(key, None)
        self.unreported.pop(key, None)
        self.kill_when_started.discard(key)
        if ent is None:
            return
        ctl = self.ctls.get(ent[0])
        if ctl is not None:
            ctl.procs.discard(key)
            self._send(ctl.ident, (P.EXIT, key, code))

    def _kill(self, key: str) -> None:
        ent = self.handles.get(key)
        if ent is None:
            return
        pid = ent[1].pid
        if pid is None:
            self.kill_when_started.add(key)
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _drop(self, ctl: _Ctl, why: str) -> None:
        self.ctls.pop(ctl.ident, None)
        n = len(ctl.procs)
        for key in list(ctl.procs):
            self._kill(key)
        # a controller leaving as it should, with nothing left running, is no news
        quiet = n == 0 and why in ("said goodbye", "shut this host down")
        (log.info if quiet else log.warning)("controller %s; killed its %d proc(s)",
                                             why, n)

    def _zygote_readable(self) -> None:
        z = self.zygote
        if not z._readable(z.status_fd):
            self.poller.unregister(z.status_fd)
            os.close(z.status_fd)
            self.zygote = None
        for key, h in list(self.unreported.items()):
            if h.pid is not None:
                del self.unreported[key]
                ent = self.handles.get(key)
                if ent is not None:
                    self._send(ent[0], (P.STARTED, key, h.pid))
                if key in self.kill_when_started:
                    self._kill(key)

    # -- loop ----------------------------------------------------------------
    def run(self) -> int:
        zmq = self.zmq
        self.poller = zmq.Poller()
        self.poller.register(self.sock, zmq.POLLIN)
        self.poller.register(self.zap, zmq.POLLIN)
        self.poller.register(self.mon.sock, zmq.POLLIN)
        self.output = OutputRelay(self.rundir,
                                  lambda fd: self.poller.register(fd, zmq.POLLIN),
                                  self.poller.unregister, self._send)
        self.stacks = AgentStacks()      # py-spy for the controller, in threads
        self.poller.register(self.stacks.fd, zmq.POLLIN)
        self._zygote()       # boots (imports the runtime once) while nobody waits
        if self.connect:
            log.info("agent dialing the controller at %s", self.connect)
        else:
            log.info("agent listening on %s", self.listen)
        last_hb = last_hello = 0.0
        while True:
            timeouts = [c.timeout for c in self.ctls.values()] or [10.0]
            hb = min(timeouts) / 5
            dialing = self.connect and not self.served
            wait = min(hb, _HELLO_EVERY_S) if dialing else hb
            for s, _ in self.poller.poll(int(wait * 1000)):
                if s is self.sock:
                    self._drain()
                elif s is self.zap:
                    self.keys.handle_zap(self.zap, P.log_refusal)
                elif s is self.mon.sock:
                    for ev in self.mon.drain():
                        if ev == "refused" and self.connect:
                            log.error("the controller at %s refused the handshake: this "
                                      "agent's job secret is not the controller's",
                                      self.connect)
                            return 2
                        if ev == "up" and dialing:
                            last_hello = 0.0     # say HELLO now the handshake is done
                        if ev == "down" and self.connect and self.ctls:
                            self._drop(self.ctls[b""], "disconnected")
                elif self.zygote is not None and s == self.zygote.status_fd:
                    self._zygote_readable()
                elif s == self.stacks.fd:
                    for ident, req, ok, value in self.stacks.answers():
                        self._send(ident, (P.STACKS, req, ok, value))
                elif self.output.owns(s):
                    self.output.readable(s)
            now = time.monotonic()
            if self.connect and not self.served and now - last_hello >= _HELLO_EVERY_S:
                # IMMEDIATE drops a send made before the handshake completes, so the
                # dialing agent repeats HELLO until the controller answers; the
                # controller ignores repeats from an agent it already knows.
                last_hello = now
                self._send(b"", (P.HELLO, self._info(None)))
            P.REFUSALS.flush()
            if now - last_hb >= hb:
                last_hb = now
                for c in list(self.ctls.values()):
                    self._send(c.ident, (P.HB,))
                    if now - c.last > c.timeout:
                        self._drop(c, f"lost (no message for {c.timeout:.1f} s)")
            if self.connect and not self.served and now - self.t0 > self.connect_timeout:
                log.error("the controller at %s did not answer within %.0f s%s",
                          self.connect, self.connect_timeout,
                          "" if self.mon.connected else " (no TCP connection)")
                return 3
            if self.once and self.served and not self.ctls and not self.handles:
                return 0
            if self.shutdown:
                return 0             # close() kills what is left
            if self.owner_pid is not None and os.getppid() != self.owner_pid:
                log.info("the process that started this agent (pid %d) is gone; "
                         "stopping", self.owner_pid)
                return 0

    def _drain(self) -> None:
        zmq = self.zmq
        while True:
            try:
                frames = self.sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            ident = frames[0] if self.listen else b""
            try:
                msg = P.loads(frames[-1])
                self._handle(ident, msg)
            except Exception as e:   # authenticated but malformed: a bug, not an attack
                log.error("bad message from the controller: %s: %s", type(e).__name__, e)

    def close(self) -> None:
        """Kill every proc, stop the zygote, close sockets; idempotent."""
        for key in list(self.handles):
            self._kill(key)
        if getattr(self, "output", None) is not None:
            self.output.close()       # off the poller: it now waits on the zygote only
            self.poller.unregister(self.stacks.fd)
            self.stacks.close()
        deadline = time.monotonic() + 3
        while self.handles and self.zygote is not None and time.monotonic() < deadline:
            if self.poller.poll(100):
                self._zygote_readable()
        for c in list(self.ctls.values()):
            self._send(c.ident, (P.BYE,))
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
        self.mon.close()
        for s in (self.sock, self.zap):
            s.close(linger=200)
        self.ctx.term()
        P.REFUSALS.flush(force=True)
        shutil.rmtree(self.rundir, ignore_errors=True)


def _unreachable(addrs, timeout: float) -> str:
    """"" when this host opens a TCP connection to every ``tcp://`` address of
    ``addrs`` within ``timeout`` seconds each, else why not, naming the first that
    failed."""
    for addr in addrs:
        if not addr.startswith("tcp://"):
            # a controller on this machine (unix://, ipc://): its socket's path
            path = addr.split("://", 1)[1]
            if os.path.exists(path):
                continue
            return (f"this host cannot reach the controller at {addr} (no such socket: "
                    "is the controller on another machine?)")
        host, port = P.parse_tcp(addr, "controller address")
        try:
            with socket.create_connection((host, port), timeout=timeout):
                pass
        except socket.timeout:
            why = f"no answer within {timeout:.1f} s (a firewall dropping it?)"
        except OSError as e:
            why = e.strerror or str(e)
        else:
            continue
        return (f"this host cannot reach the controller at {host}:{port} ({why}); "
                "procs reply there: open that port to this host, or have the controller "
                "bind an address it reaches (MONARCH_CY_HOST, "
                "MONARCH_CY_CONTROLLER_INTERFACE, MONARCH_CY_CONTROLLER_PORTS)")
    return ""


def _adopt_fd(fd: int, listen: str) -> tuple[str, int]:
    """``(host, port)`` of the inherited TCP socket ``fd``, made listening (zmq takes
    over a listening socket); ``ValueError`` naming ``fd`` when it is not one."""
    host = listen[len("tcp://"):].strip("[]")
    try:
        s = socket.socket(fileno=fd)
    except OSError as e:
        raise ValueError(f"worker address {listen}:fd{fd}: file descriptor {fd} is not "
                         f"an open socket of this process ({e.strerror})") from None
    try:
        if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET,
                                                            socket.AF_INET6):
            raise ValueError(f"worker address {listen}:fd{fd}: file descriptor {fd} is "
                             "not a TCP socket")
        port = s.getsockname()[1]
        if not port:
            raise ValueError(f"worker address {listen}:fd{fd}: the socket is not bound")
        s.listen(128)
    finally:
        s.detach()                       # the fd stays open: zmq owns it from here
    return host, port


def _parse_listen(addr: str) -> tuple[str, int]:
    """``(host, port)`` of a ``--listen`` address; port 0 (``tcp://host:0``) asks for
    any free port."""
    if isinstance(addr, str) and addr.startswith("tcp://") and addr.endswith(":0"):
        host = addr[6:-2].strip("[]")
        if host:
            return host, 0
    return P.parse_tcp(addr, "--listen address")


def write_address(path: str, addr: str) -> None:
    """Write ``addr`` to ``path`` atomically (a reader sees all of it or nothing)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(addr + "\n")
    os.replace(tmp, path)


def _free_ports(ip: str, ports) -> list[int]:
    """The ports of ``ports`` (inclusive range) that can be bound on ``ip`` now."""
    lo, hi = ports
    out = []
    for p in range(lo, hi + 1):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((ip, p))
            except OSError:
                continue
        out.append(p)
    return out


def _parse_ports(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if not m or not 0 < int(m[1]) <= int(m[2]) < 65536:
        raise argparse.ArgumentTypeError(f"--ports {text!r} must look like 26601-27600")
    return int(m[1]), int(m[2])


def _default_rank():
    """``MONARCH_CY_AGENT_RANK`` (``ValueError`` for one that is not an int >= 0), else
    ``SLURM_NODEID`` when it is one, else None."""
    rank = _config.agent_rank()
    if rank is not None:
        return rank
    v = os.environ.get("SLURM_NODEID", "")
    return int(v) if v.isdigit() else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="monarch-cy-agent",
        description="Run a monarch_cy host agent: starts procs on this machine for a "
                    "remote controller.  The job secret comes from --secret-file, "
                    f"${ENV_FILE} or ${ENV} (never the command line).")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--listen", metavar="tcp://HOST:PORT",
                      help="wait for controllers on this address (or ipc:///PATH, a "
                      "Unix socket on this machine)")
    mode.add_argument("--connect", metavar="tcp://HOST:PORT",
                      help="dial the controller at this address")
    ap.add_argument("--secret-file", metavar="PATH", help="file holding the job secret "
                    "(64 hex digits, mode 0600)")
    ap.add_argument("--ports", type=_parse_ports, default=P.DEFAULT_PROC_PORTS,
                    metavar="A-B", help="ports the procs bind (default 26601-27600)")
    ap.add_argument("--advertise", metavar="IP", help="address procs bind and peers "
                    "reach (default: the one the controller reached / routes to)")
    ap.add_argument("--rank", type=int, default=_default_rank(),
                    help="this host's rank in the mesh (default $MONARCH_CY_AGENT_RANK "
                    "or $SLURM_NODEID)")
    ap.add_argument("--once", action="store_true",
                    help="exit when the first controller is gone")
    ap.add_argument("--connect-timeout", type=float, default=60.0, metavar="S",
                    help="with --connect: give up after S seconds without an answer")
    ap.add_argument("--address-file", metavar="PATH", help="with --listen: write the "
                    "bound address here once listening (tcp://HOST:0 picks a free port)")
    ap.add_argument("--owner-pid", type=int, metavar="PID", help="exit when this agent's "
                    "parent, PID, is gone (SIGUSR1 stops watching it)")
    ap.add_argument("--log-level", default="INFO")
    a = ap.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), stream=sys.stderr,
                        format=f"[agent {socket.gethostname()}] %(levelname)s %(message)s")
    try:
        secret = default_secret(a.secret_file)
        agent = Agent(secret, listen=a.listen, connect=a.connect, ports=a.ports,
                      advertise=a.advertise, rank=a.rank, once=a.once,
                      connect_timeout=a.connect_timeout, owner_pid=a.owner_pid)
    except ValueError as e:
        log.error("%s", e)
        return 2

    def on_detach(signum, frame):
        agent.owner_pid = None
    signal.signal(signal.SIGUSR1, on_detach)
    if a.address_file and agent.listen:
        write_address(a.address_file, agent.listen)

    def on_signal(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    code = 1
    try:
        code = agent.run()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
        log.info("signalled; stopping")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        agent.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
