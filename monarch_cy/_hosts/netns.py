"""Fake hosts on one machine: network namespaces on a private bridge (tests, benches).

:class:`NetnsHosts` makes ``n`` namespaces ``<prefix>h<i>``, each with one veth end
(``eth0``, address ``10.<a>.<b>.<i+2>/24``) whose peer sits on a bridge
``<prefix>br`` holding ``.1`` in the root namespace, where the controller runs.  No
default route is set and nothing is forwarded or NATed: traffic stays between
these namespaces and the root namespace's bridge address.  ``cut(i)`` sets host
``i``'s link down (its packets are dropped, as when a machine falls off the
network).  ``start_agent(i, ...)`` runs an agent in namespace ``i`` with its own
hostname (a private UTS namespace), so each fake host has its own name.
``close()`` kills what it started and deletes every interface and namespace;
idempotent, also run at exit.  Needs root and ``ip netns``.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import subprocess
import sys

__all__ = ["NetnsHosts", "available"]


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def available() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, bridge)"
    for tool in ("ip", "nsenter", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} not found (install iproute2 / util-linux)"
    name = f"mcyp{os.getpid() % 100000}"
    r = _ip("netns", "add", name, check=False)
    if r.returncode:
        return f"ip netns add failed: {r.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


class NetnsHosts:
    """``n`` namespace hosts on a private bridge (see the module docstring)."""

    def __init__(self, n: int, prefix: str | None = None) -> None:
        if not 1 <= n <= 200:
            raise ValueError(f"n must be in 1..200, not {n!r}")
        self.prefix = prefix or f"m{os.getpid() % 1000}{random.randrange(100000):05d}"
        a, b = 200 + random.randrange(50), random.randrange(256)
        self.net = f"10.{a}.{b}"
        self.gateway = f"{self.net}.1"
        self.bridge = f"{self.prefix}br"
        self.names = [f"{self.prefix}h{i}" for i in range(n)]
        self.ips = [f"{self.net}.{i + 2}" for i in range(n)]
        self.vethes = [f"{self.prefix}v{i}" for i in range(n)]
        self.hostnames = [f"{self.prefix}-node{i}" for i in range(n)]
        self.procs = []
        self._closed = False
        atexit.register(self.close)
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for name, ip, veth in zip(self.names, self.ips, self.vethes):
                _ip("netns", "add", name)
                _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0",
                    "netns", name)
                _ip("link", "set", veth, "master", self.bridge)
                _ip("link", "set", veth, "up")
                _ip("-n", name, "addr", "add", f"{ip}/24", "dev", "eth0")
                _ip("-n", name, "link", "set", "eth0", "up")
                _ip("-n", name, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def popen(self, i: int, argv, *, env=None, hostname: bool = True, **kw):
        """Start ``argv`` in namespace ``i`` (own hostname), tracked for close()."""
        cmd = ["nsenter", f"--net=/run/netns/{self.names[i]}", "--"]
        if hostname:
            cmd += ["unshare", "--uts", "--", "sh", "-c",
                    f'hostname {self.hostnames[i]} && exec "$@"', "sh"]
        p = subprocess.Popen(cmd + list(argv), env=env, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def start_agent(self, i: int, *, secret_hex: str, port: int = 26600, args=(),
                    env=None, **kw):
        """Run an agent listening on ``tcp://<ip i>:port`` in namespace ``i``."""
        e = dict(os.environ if env is None else env)
        e["MONARCH_CY_JOB_SECRET"] = secret_hex
        e.pop("MONARCH_CY_JOB_SECRET_FILE", None)
        return self.popen(i, [sys.executable, "-m", "monarch_cy._hosts.agent",
                              "--listen", f"tcp://{self.ips[i]}:{port}",
                              "--log-level", "WARNING", *args], env=e, **kw)

    def cut(self, i: int) -> None:
        """Take host ``i`` off the network (its bridge-side link down)."""
        _ip("link", "set", self.vethes[i], "down")

    def run(self, i: int, argv, **kw):
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.names[i]}", "--",
                               *argv], **kw)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for sig, wait in ((15, 3), (9, 5)):    # TERM first: agents clean up after them
            for p in self.procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
            for p in self.procs:
                try:
                    p.wait(wait)
                except subprocess.TimeoutExpired:
                    pass
        for name in self.names:
            # anything still in the namespace (procs of a killed agent) goes first
            r = _ip("netns", "pids", name, check=False)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", name, check=False)
        for veth in self.vethes:
            _ip("link", "del", veth, check=False)
        _ip("link", "del", self.bridge, check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
