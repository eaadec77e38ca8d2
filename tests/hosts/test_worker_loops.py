"""Worker loops started by hand (``run_worker_loop_forever``,
``run_worker_loop_until_shutdown``, ``start_worker_loop_forever``), as real
processes on loopback, then attached with ``attach_to_workers`` from controller
processes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from _hosts_support import ROOT, scenario_env
from _job_support import run_job, wait_gone
from test_controller_address import _free_range

SECRET = os.urandom(32).hex()


def _worker(fn: str, port: int, ports: tuple, *, extra: str = "") -> subprocess.Popen:
    code = (f"import sys; from monarch_cy.actor import {fn}\n"
            f"r = {fn}(address='tcp://127.0.0.1:{port}', ca='trust_all_connections', "
            f"ports={ports!r})\n"
            f"{extra}\n"
            "print('RETURNED', r, flush=True)\n")
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT,
                            env=scenario_env(MONARCH_CY_JOB_SECRET=SECRET),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _listening(port: int, p: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert p.poll() is None, p.communicate()
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise AssertionError(f"no worker loop on port {port}")


def _stop(p: subprocess.Popen):
    if p.poll() is None:
        p.kill()
    return p.communicate(timeout=10)


@pytest.fixture
def two_ports():
    a = _free_range(2)
    return a[0], a[1]


def test_forever_serves_controller_after_controller(two_ports):
    loops = [_worker("run_worker_loop_forever", port, _free_range(10))
             for port in two_ports]
    try:
        for port, p in zip(two_ports, loops):
            _listening(port, p)
        workers = [f"tcp://127.0.0.1:{port}" for port in two_ports]
        for _ in range(2):            # a second controller attaches to the same loops
            res, _ = run_job("attach_workers", {"workers": workers, "per_host": 2},
                             MONARCH_CY_JOB_SECRET=SECRET)
            assert len(res["procs"]) == 4
            assert wait_gone([p["pid"] for p in res["procs"]], 10) == []
            assert all(p.poll() is None for p in loops)
        for p in loops:               # a signal ends the loop (SystemExit)
            os.kill(p.pid, signal.SIGTERM)
            assert p.wait(15) == 128 + signal.SIGTERM
    finally:
        for p in loops:
            _stop(p)


def test_until_shutdown_returns_when_its_controller_is_gone(two_ports):
    port = two_ports[0]
    p = _worker("run_worker_loop_until_shutdown", port, _free_range(10))
    try:
        _listening(port, p)
        res, _ = run_job("attach_workers", {"workers": [f"tcp://127.0.0.1:{port}"]},
                         MONARCH_CY_JOB_SECRET=SECRET)
        assert len(res["procs"]) == 1
        out, err = p.communicate(timeout=20)
        assert p.returncode == 0 and "RETURNED None" in out, err[-2000:]
        assert wait_gone([res["procs"][0]["pid"]], 5) == []
    finally:
        _stop(p)


def test_start_forever_returns_a_future(two_ports):
    port = two_ports[0]
    p = _worker("start_worker_loop_forever", port, _free_range(10),
                extra="print('STARTED', type(r).__name__, flush=True); r.get()")
    try:
        line = p.stdout.readline()
        assert line.startswith("STARTED Future"), (line, p.stderr.read()[-2000:])
        _listening(port, p)
        res, _ = run_job("attach_workers", {"workers": [f"tcp://127.0.0.1:{port}"]},
                         MONARCH_CY_JOB_SECRET=SECRET)
        assert len(res["procs"]) == 1 and p.poll() is None
    finally:
        _stop(p)


def test_a_wrong_secret_is_refused(two_ports):
    port = two_ports[0]
    p = _worker("run_worker_loop_forever", port, _free_range(10))
    try:
        _listening(port, p)
        res, r = run_job("attach_workers", {"workers": [f"tcp://127.0.0.1:{port}"]},
                         check=False, MONARCH_CY_JOB_SECRET=os.urandom(32).hex(),
                         MONARCH_CY_ATTACH_TIMEOUT="3")
        assert res is None and r.returncode != 0
        assert p.poll() is None
    finally:
        _stop(p)


def test_arguments_are_checked_before_anything_starts():
    from monarch_cy.actor import (run_worker_loop_forever, run_worker_loop_until_shutdown,
                                  start_worker_loop_forever)
    for fn in (run_worker_loop_forever, run_worker_loop_until_shutdown,
               start_worker_loop_forever):
        with pytest.raises(TypeError):
            fn(address="tcp://127.0.0.1:1")                       # ca is required
        with pytest.raises(NotImplementedError, match="TLS"):
            fn(address="tcp://127.0.0.1:1", ca="/etc/ca.pem")
        with pytest.raises(NotImplementedError, match="TLS"):
            fn(address="tcp://127.0.0.1:1", ca="trust_all_connections",
               private_key=b"k")
        with pytest.raises(NotImplementedError, match="wildcard"):
            fn(address="tcp://*:4444", ca="trust_all_connections")
        with pytest.raises(ValueError, match=r'invalid worker address "metatls://w0:1": '
                                             r"unsupported ZMQ scheme: metatls"):
            fn(address="metatls://w0:1", ca="trust_all_connections")
        with pytest.raises(ValueError, match='"tcp://host": not HOST:PORT'):
            fn(address="tcp://host", ca="trust_all_connections")
        with pytest.raises(ValueError, match="file descriptor 987 is not an open socket"):
            fn(address="tcp://127.0.0.1:fd987", ca="trust_all_connections")


def test_address_forms():
    from monarch_cy._hosts.worker_loop import parse_worker_address as parse
    assert parse("tcp://10.0.0.1:4444") == ("tcp://10.0.0.1:4444", None)
    assert parse("tcp://w0:4444@tcp://0.0.0.0:4444") == ("tcp://0.0.0.0:4444", "w0")
    assert parse("service<2MuAHeDjLCEd>@tcp://w0:4444") == ("tcp://w0:4444", None)
    with pytest.raises(ValueError, match="ports differ"):
        parse("tcp://w0:1@tcp://0.0.0.0:2")

