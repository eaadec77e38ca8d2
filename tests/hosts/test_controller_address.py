"""Where the controller listens for remote hosts, and what hosts see when they
cannot get there.

* An agent on 127.0.0.1 attached from the same machine (a first trial before a
  cluster): procs start through it, answer, stop, and the agent exits (``--once``).
* ``MONARCH_CY_CONTROLLER_PORTS`` puts every port the controller listens on for
  hosts inside the range; a range already in use is an error naming it.  An agent
  whose ``--ports`` range is in use fails its host, naming that range.
* ``MONARCH_CY_CONTROLLER_INTERFACE`` binds the interface's address (namespace
  hosts reach the controller there); a bad one is a ``ValueError`` naming it.
* A controller bound where the hosts cannot reach it: the procs fail at once with
  the ``address:port`` the host tried; a dialing agent that cannot reach its
  controller exits naming the address.

Traffic goes only to loopback and to namespace hosts these tests make.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time

import pytest

from _hosts_support import HERE, ROOT, TIMEOUT, Hosts, scenario_env, wait_gone
from monarch_cy._hosts import protocol as P


def _run(name, args, env, timeout=90):
    r = subprocess.run([sys.executable, os.path.join(HERE, "_addr_scenarios.py"), name,
                        json.dumps(args)], env=env, capture_output=True, text=True,
                       timeout=timeout)
    res = next((json.loads(line[7:]) for line in r.stdout.splitlines()
                if line.startswith("RESULT ")), None)
    assert r.returncode == 0 and res is not None, \
        f"scenario {name} failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return res


def _free_range(n: int, host: str = "127.0.0.1") -> tuple[int, int]:
    """``n`` consecutive ports, all free on ``host`` now, away from the defaults."""
    for _ in range(200):
        lo = random.randrange(20000, 26000)
        try:
            socks = [socket.create_server((host, p)) for p in range(lo, lo + n)]
        except OSError:
            continue
        for s in socks:
            s.close()
        return lo, lo + n - 1
    raise AssertionError(f"no {n} free consecutive ports on {host}")


def _port(addr: str) -> int:
    return P.parse_tcp(addr)[1]


class LocalAgent:
    """An agent listening on 127.0.0.1 (``--once``), stderr to a log file."""

    def __init__(self, tmp, *args, ports=None) -> None:
        self.secret = os.urandom(32).hex()
        self.port = _free_range(1)[0]
        self.worker = f"tcp://127.0.0.1:{self.port}"
        lo, hi = ports or _free_range(20)
        self.logf = open(os.path.join(tmp, "agent.log"), "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "monarch_cy._hosts.agent", "--listen", self.worker,
             "--ports", f"{lo}-{hi}", "--once", "--log-level", "INFO", *args],
            env=self.env(TMPDIR=tmp), stderr=self.logf, start_new_session=True)

    def env(self, **extra):
        return scenario_env(MONARCH_CY_JOB_SECRET=self.secret, **extra)

    def log(self) -> str:
        self.logf.flush()
        with open(self.logf.name) as f:
            return f.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


@pytest.fixture
def agent(tmp_path):
    a = LocalAgent(str(tmp_path))
    try:
        yield a
    finally:
        a.close()


# -- one machine, loopback ------------------------------------------------------------

def test_attach_to_an_agent_on_loopback(agent):
    res = _run("reachable", {"workers": [agent.worker], "procs": 2,
                             "then_remote": "tcp://198.51.100.7:26600"}, agent.env())
    assert res["ranks"] == [0, 1] and len(set(res["pids"])) == 2, res
    assert res["addr"].startswith("tcp://127.0.0.1:"), res
    # later, a worker elsewhere: refused before connecting, naming the addresses
    assert "local-only addresses (tcp://127.0.0.1:" in res["remote_error"], res
    assert "198.51.100.7 cannot reach" in res["remote_error"], res
    # the controller said goodbye: the --once agent exits, its procs are gone
    assert agent.proc.wait(15) == 0, agent.log()
    assert wait_gone(res["pids"], 5) == []


def test_controller_ports_come_from_the_range(agent):
    lo, hi = _free_range(5)
    res = _run("reachable", {"workers": [agent.worker]},
               agent.env(MONARCH_CY_CONTROLLER_PORTS=f"{lo}-{hi}"))
    ports = [_port(res[k]) for k in ("addr", "daddr", "cc")]
    assert len(set(ports)) == 3 and all(lo <= p <= hi for p in ports), (ports, lo, hi)


def test_a_controller_port_range_in_use_is_an_error_naming_it(agent):
    lo, hi = _free_range(2)
    held = [socket.create_server(("127.0.0.1", p)) for p in (lo, hi)]
    try:
        res = _run("attach_error", {"workers": [agent.worker]},
                   agent.env(MONARCH_CY_CONTROLLER_PORTS=f"{lo}-{hi}"))
    finally:
        for s in held:
            s.close()
    assert res["type"] == "OSError", res
    assert f"no free port left in MONARCH_CY_CONTROLLER_PORTS={lo}-{hi} on 127.0.0.1" \
        in res["error"], res
    assert res["took"] < 5, res
    assert agent.proc.poll() is None       # nothing reached it; it still serves


def test_an_agent_port_range_in_use_fails_the_host_naming_it(tmp_path):
    lo, _ = _free_range(1)
    held = socket.create_server(("127.0.0.1", lo))
    a = LocalAgent(str(tmp_path), ports=(lo, lo))
    try:
        res = _run("attach_error", {"workers": [a.worker]}, a.env())
        assert a.proc.wait(15) == 0       # told goodbye at once; --once: it exits
        log = a.log()
    finally:
        held.close()
        a.close()
    assert "HostError" in res["mro"], res
    assert f"no free port in its agent's --ports range {lo}-{lo} on 127.0.0.1" \
        in res["error"], res
    assert "controller said goodbye" in log, log


def test_a_dialing_agent_that_cannot_reach_its_controller_names_it():
    port = _free_range(1)[0]            # nothing listens there
    env = scenario_env(MONARCH_CY_JOB_SECRET=os.urandom(32).hex())
    r = subprocess.run([sys.executable, "-m", "monarch_cy._hosts.agent", "--connect",
                        f"tcp://127.0.0.1:{port}", "--connect-timeout", "1"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    assert f"the controller at tcp://127.0.0.1:{port} did not answer" in r.stderr
    assert "no TCP connection" in r.stderr


def test_bad_address_settings_are_errors_naming_them(monkeypatch):
    from monarch_cy._hosts.attach import configured_ip, controller_ip
    for v in ("MONARCH_CY_HOST", "MONARCH_CY_CONTROLLER_INTERFACE"):
        monkeypatch.delenv(v, raising=False)
    assert configured_ip() is None
    monkeypatch.setenv("MONARCH_CY_CONTROLLER_INTERFACE", "lo")
    assert configured_ip() == controller_ip("198.51.100.7") == "127.0.0.1"
    monkeypatch.setenv("MONARCH_CY_CONTROLLER_INTERFACE", "nope0")
    with pytest.raises(ValueError, match=r"MONARCH_CY_CONTROLLER_INTERFACE='nope0': no "
                       r"such network interface on this machine \(it has lo"):
        configured_ip()
    monkeypatch.setenv("MONARCH_CY_HOST", "10.0.0.7")
    with pytest.raises(ValueError, match="are both set; set only one"):
        configured_ip()
    monkeypatch.delenv("MONARCH_CY_CONTROLLER_INTERFACE")
    assert controller_ip(None) == "10.0.0.7"
    monkeypatch.setenv("MONARCH_CY_HOST", "0.0.0.0")
    with pytest.raises(ValueError, match=r"MONARCH_CY_HOST='0.0.0.0' is a wildcard"):
        configured_ip()


# -- namespace hosts ------------------------------------------------------------------

@pytest.fixture
def host1(netns_ok, tmp_path):
    h = Hosts(1, str(tmp_path))
    try:
        yield h
    finally:
        h.close()


def test_interface_and_port_range_across_hosts(host1):
    lo, hi = _free_range(4, "0.0.0.0")
    res = _run("reachable", {"workers": host1.workers, "procs": 2},
               scenario_env(MONARCH_CY_JOB_SECRET=host1.secret,
                            MONARCH_CY_CONTROLLER_INTERFACE=host1.net.bridge,
                            MONARCH_CY_CONTROLLER_PORTS=f"{lo}-{hi}"))
    assert res["ranks"] == [0, 1], res
    for k in ("addr", "daddr", "cc"):
        ip, port = P.parse_tcp(res[k])
        assert ip == host1.net.gateway and lo <= port <= hi, (k, res, lo, hi)


def test_a_controller_the_hosts_cannot_reach_fails_naming_the_address(host1):
    # an address of this machine that the namespace hosts have no route to
    # (TEST-NET-2, on our own bridge; it goes away with the bridge)
    ip = f"198.51.100.{random.randrange(2, 250)}"
    subprocess.run(["ip", "addr", "add", f"{ip}/32", "dev", host1.net.bridge], check=True)
    res = _run("unreachable", {"workers": host1.workers},
               scenario_env(MONARCH_CY_JOB_SECRET=host1.secret, MONARCH_CY_HOST=ip))
    want = f"cannot reach the controller at {ip}:{_port(res['addr'])}"
    assert res["addr"].startswith(f"tcp://{ip}:") and want in res["error"], res
    assert res["took"] < TIMEOUT + 3, res
    assert want in host1.log(0)
    assert host1.agents[0].poll() is None


def test_an_agent_reads_stacks_only_of_its_procs_and_survives_bad_requests(agent):
    """A controller's STACKS for a key the agent never started is answered with an
    error entry (the agent reads only procs it started for that controller, never a
    pid it is sent), and a malformed request is logged while the agent serves on."""
    import zmq
    from monarch_cy._transport.auth import JobKeys
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        JobKeys(bytes.fromhex(agent.secret)).client(sock)
        sock.connect(agent.worker)

        def ask(msg, want_kind):
            sock.send(P.dumps(msg))
            end = time.monotonic() + 20
            while time.monotonic() < end:
                if sock.poll(500):
                    reply = P.loads(sock.recv())
                    if reply[0] == want_kind:
                        return reply
            raise AssertionError(f"no {want_kind} answer to {msg!r}:\n{agent.log()}")

        ask((P.HELLO, {"ip": "127.0.0.1", "timeout": 10}), P.HELLO)
        ask((P.STACKS, 7, "tcp://127.0.0.1:1", "not a rank", 1.0), P.HB)   # malformed
        _, req, ok, value = ask((P.STACKS, 8, "tcp://127.0.0.1:1", 3, 1.0), P.STACKS)
        assert req == 8 and ok and value.rank == 3 and value.pid is None, value
        assert "not running on this host" in value.error, value
        assert "bad message from the controller: ValueError" in agent.log()
        sock.send(P.dumps((P.BYE,)))
    finally:
        sock.close(0)
        ctx.term()
