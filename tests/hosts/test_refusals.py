"""A connection flood against a host agent is no log flood: refusals (failed CURVE
handshakes, ZAP refusals) are logged a few per interval, then one line with the count.
Loopback only; the peers send a ZMTP greeting with the NULL mechanism, which a CURVE
server refuses."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time

import zmq

from monarch_cy._hosts import protocol as P
from monarch_cy._log import RateLimited
from monarch_cy._transport.auth import ZAP_ENDPOINT, JobKeys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# signature, version 3.0, mechanism NULL, as-server 0, filler (ZMTP 3.0, 64 bytes)
GREETING = b"\xff" + b"\0" * 8 + b"\x7f\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" * 32
SUMMARY = re.compile(r"\.\.\. and (\d+) more refused connections in the last")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _flood(port: int, n: int, step=None) -> None:
    """``n`` refused connections, 100 at a time, each until the server dropped it;
    ``step()`` runs while waiting (an in-process server's loop)."""
    for _ in range(0, n, 100):
        socks = []
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(GREETING)
            socks.append(s)
        for s in socks:
            s.setblocking(False)
            end = time.monotonic() + 10
            while True:
                if step is not None:
                    step()
                try:
                    if not s.recv(4096):
                        break
                except BlockingIOError:
                    assert time.monotonic() < end, "the server did not drop a peer"
                    time.sleep(0.001)
                except ConnectionResetError:
                    break
            s.close()


def _counts(lines):
    each = [m for m in lines if "refused a connection" in m]
    summaries = [int(SUMMARY.search(m)[1]) for m in lines if SUMMARY.search(m)]
    return each, summaries


def test_log_refusal_is_rate_limited(monkeypatch, caplog):
    monkeypatch.setattr(P, "REFUSALS", RateLimited(P.log, "refused connections",
                                                   interval=0.3))
    caplog.set_level(logging.WARNING, "monarch_cy.hosts")
    for i in range(1000):
        P.log_refusal(f"10.0.0.{i % 250}")
    assert len(caplog.records) == 5
    P.REFUSALS.flush()
    assert len(caplog.records) == 5                  # the interval has not ended
    time.sleep(0.35)
    P.REFUSALS.flush()
    each, summaries = _counts([r.getMessage() for r in caplog.records])
    assert len(caplog.records) == 6 and len(each) == 5 and summaries == [995]
    P.log_refusal("10.0.0.1")                        # a new window: logged again
    assert len(caplog.records) == 7


def test_handshake_failures_of_a_curve_server_are_rate_limited(monkeypatch, caplog):
    """The sockets and handlers the agent and the host hub use (Monitor, ZAP), in
    process: 1000 refused peers give 5 lines, then one summary with the count."""
    monkeypatch.setattr(P, "REFUSALS", RateLimited(P.log, "refused connections"))
    caplog.set_level(logging.WARNING, "monarch_cy.hosts")
    keys = JobKeys()
    ctx = zmq.Context()
    try:
        zap = ctx.socket(zmq.REP)
        zap.bind(ZAP_ENDPOINT)
        router = ctx.socket(zmq.ROUTER)
        keys.server(router)
        mon = P.Monitor(router, "tcp://127.0.0.1", server=True)
        port = router.bind_to_random_port("tcp://127.0.0.1")
        poller = zmq.Poller()
        poller.register(zap, zmq.POLLIN)
        poller.register(mon.sock, zmq.POLLIN)

        def step():
            for s, _ in poller.poll(0):
                if s is zap:
                    keys.handle_zap(zap, P.log_refusal)
                else:
                    mon.drain()
        _flood(port, 1000, step)
        end = time.monotonic() + 5
        while mon.failed < 1000 and time.monotonic() < end:
            step()
            time.sleep(0.01)
        assert mon.failed == 1000
        assert len(caplog.records) == 5
        P.REFUSALS.flush(force=True)                  # what closing does
        each, summaries = _counts([r.getMessage() for r in caplog.records])
        assert len(each) == 5 and summaries == [995]
        mon.close()
    finally:
        ctx.destroy(linger=0)


def test_listening_agent_under_a_connection_flood_logs_a_handful_of_lines(tmp_path):
    """The real agent: 1000 refused connections, then SIGTERM; its log holds 5
    refusals and a summary counting the other 995."""
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=ROOT, MONARCH_CY_JOB_SECRET=os.urandom(32).hex(),
               TMPDIR=str(tmp_path))
    env.pop("MONARCH_CY_JOB_SECRET_FILE", None)
    log = open(tmp_path / "agent.log", "w+")
    p = subprocess.Popen([sys.executable, "-m", "monarch_cy._hosts.agent", "--listen",
                          f"tcp://127.0.0.1:{port}"], env=env, stderr=log)
    try:
        end = time.monotonic() + 60
        while "agent listening" not in (tmp_path / "agent.log").read_text():
            assert p.poll() is None and time.monotonic() < end, \
                (tmp_path / "agent.log").read_text()
            time.sleep(0.05)
        _flood(port, 1000)
        time.sleep(0.5)                                 # its monitor saw the last ones
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()
    lines = (tmp_path / "agent.log").read_text().splitlines()
    each, summaries = _counts(lines)
    assert len(each) == 5, lines[:20]
    assert summaries == [995], [m for m in lines if "more refused" in m]
    assert len(lines) < 20, lines
