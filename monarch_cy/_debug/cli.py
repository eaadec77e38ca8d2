"""``monarch-cy debug``: attach this terminal to a running job's debugger.

Like Monarch's ``monarch debug`` (which runs netcat against the job's debug port),
it gives the ``monarch_dbg>`` prompt of the job's debug controller; unlike it, the
connection is a CURVE-authenticated zmq socket and the job secret is needed
(:mod:`.server`).  Which job:

* ``--host``/``--port`` (defaults ``MONARCH_DEBUG_SERVER_HOST``/``_PORT``, as
  Monarch's): that address; the secret from ``--secret-file``,
  ``MONARCH_CY_JOB_SECRET_FILE`` or ``MONARCH_CY_JOB_SECRET``, else from the job of
  this user on this machine listening there;
* otherwise the job of this user on this machine that serves a debugger (found by
  the ``debug.json`` in its run directory); ``--job PID`` picks one of several.

Exit codes: 0 after ``quit``; 1 when no job is found, the job refuses the secret
or does not answer; 2 usage (also several jobs and no ``--job``); 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time

from monarch_cy._cli_common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, HelpFormatter
from monarch_cy._actor.launch.job_file import pid_alive

__all__ = ["add_parser", "find_jobs", "run"]

_ANSWER_TIMEOUT = 10.0


def add_parser(sub, epilog: str = "") -> None:
    """Register ``debug`` on the ``monarch-cy`` subparsers ``sub``."""
    p = sub.add_parser(
        "debug", help="attach to the debugger of a running job (breakpoint() in actors)",
        description="Attach this terminal to the monarch_dbg> prompt of a running job "
                    "whose actors hit breakpoint(): list the paused ranks, attach to "
                    "one, cast pdb commands to several, continue. Authenticates with "
                    "the job secret. See docs/observability.md.",
        epilog="exit codes: 0 after quit, 1 no job / refused / no answer, 2 usage, "
               "130 interrupted. See docs/cli.md.", formatter_class=HelpFormatter)
    p.add_argument("--host", default=None,
                   help="the job's debug server host (default $MONARCH_DEBUG_SERVER_HOST, "
                        "else the job found on this machine)")
    p.add_argument("--port", type=int, default=None,
                   help="the job's debug server port (default $MONARCH_DEBUG_SERVER_PORT, "
                        "else the job found on this machine)")
    p.add_argument("--job", type=int, default=None, metavar="PID",
                   help="the controller's pid, when several jobs of yours run here "
                        "(default: the only one)")
    p.add_argument("--secret-file", default=None, metavar="PATH",
                   help="file with the job secret (64 hex digits) (default "
                        "$MONARCH_CY_JOB_SECRET_FILE, $MONARCH_CY_JOB_SECRET, or the "
                        "local job's own)")
    p.set_defaults(func=run)


def find_jobs() -> list:
    """The jobs of this user on this machine that serve a debugger: dicts with
    ``address``, ``pid``, ``secret`` (read from their run directories)."""
    from monarch_cy._actor.launch.rundir import base_dir
    from monarch_cy._debug.server import DISCOVERY
    bases = {base_dir() or tempfile.gettempdir(), tempfile.gettempdir()}
    if os.path.isdir("/dev/shm"):
        bases.add("/dev/shm")
    found = []
    for base in sorted(bases):
        for path in glob.glob(os.path.join(base, "mcy-*", DISCOVERY)):
            try:
                with open(path) as f:
                    info = json.load(f)
                if pid_alive(int(info["pid"])):
                    found.append(info)
            except (OSError, ValueError, KeyError, TypeError):
                continue                 # another user's, or being written
    return sorted(found, key=lambda i: i["pid"])


def _target(args, err):
    """``(address, secret bytes)`` or an exit code."""
    from monarch_cy._transport.secret import ENV, ENV_FILE, load_secret
    host = args.host or os.environ.get("MONARCH_DEBUG_SERVER_HOST", "").strip() or None
    port = args.port
    if port is None and os.environ.get("MONARCH_DEBUG_SERVER_PORT", "").strip() not in \
            ("", "0"):      # 0: the job's server took a free port; find the job instead
        raw = os.environ["MONARCH_DEBUG_SERVER_PORT"].strip()
        if not raw.isdigit():
            print(f"monarch-cy debug: MONARCH_DEBUG_SERVER_PORT={raw!r} must be a port "
                  "number", file=err)
            return EXIT_USAGE
        port = int(raw)
    if port is not None and not 0 < port < 65536:
        print(f"monarch-cy debug: --port must be a port number (1-65535), not {port}",
              file=err)
        return EXIT_USAGE
    jobs = find_jobs()
    if args.job is not None:
        jobs = [j for j in jobs if j["pid"] == args.job]
        if not jobs:
            print(f"monarch-cy debug: no job with controller pid {args.job} serves a "
                  "debugger on this machine (a job starts its debugger at its first "
                  "breakpoint)", file=err)
            return EXIT_FAILED
    if port is not None:
        address = f"tcp://{host or 'localhost'}:{port}"
        explicit = args.secret_file or os.environ.get(ENV_FILE) or os.environ.get(ENV)
        if explicit:
            try:
                return address, load_secret(args.secret_file)
            except ValueError as e:
                print(f"monarch-cy debug: {e}", file=err)
                return EXIT_USAGE
        mine = [j for j in jobs if j["address"].rsplit(":", 1)[-1] == str(port)]
        if not mine:
            print(f"monarch-cy debug: no job secret for {address}: pass --secret-file "
                  f"PATH, or set {ENV_FILE} or {ENV}", file=err)
            return EXIT_USAGE
        return address, bytes.fromhex(mine[0]["secret"])
    if not jobs:
        print("monarch-cy debug: no job of yours on this machine serves a debugger (a "
              "job starts it at its first breakpoint); for a job elsewhere pass --host "
              "and --port", file=err)
        return EXIT_FAILED
    if len(jobs) > 1:
        listed = ", ".join(f"{j['pid']} ({j['address']})" for j in jobs)
        print(f"monarch-cy debug: several jobs serve a debugger here; pick one with "
              f"--job PID: {listed}", file=err)
        return EXIT_USAGE
    return jobs[0]["address"], bytes.fromhex(jobs[0]["secret"])


def run(args, out) -> int:
    """The command: connect, then relay this terminal's lines and the job's output."""
    err = sys.stderr
    target = _target(args, err)
    if isinstance(target, int):
        return target
    address, secret = target
    import zmq
    from monarch_cy._transport.auth import JobKeys
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    JobKeys(secret).client(sock)
    monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH |
                                      zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                      zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
    try:
        sock.connect(address)
        sock.send_multipart([b"hello", b""])
        return _relay(sock, monitor, address, out, err)
    finally:
        try:
            sock.send_multipart([b"bye", b""], zmq.NOBLOCK)
        except zmq.ZMQError:
            pass
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=200)
        ctx.term()


def _relay(sock, monitor, address, out, err) -> int:
    import zmq
    from zmq.utils.monitor import recv_monitor_message
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    poller.register(monitor, zmq.POLLIN)
    stdin = sys.stdin.fileno()
    answered = False
    started = last_ping = time.monotonic()
    buf = b""
    while True:
        events = dict(poller.poll(1000))
        if monitor in events:
            ev = recv_monitor_message(monitor)
            if not answered:
                print(f"monarch-cy debug: {address} refused this connection: the job "
                      "secret is not that job's (event "
                      f"{zmq.Event(ev['event']).name})", file=err)
                return EXIT_FAILED
        while sock in events:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if not answered:
                answered = True
                poller.register(stdin, zmq.POLLIN)
            kind = frames[0]
            text = frames[1].decode(errors="replace") if len(frames) > 1 else ""
            if kind == b"out":
                out.write(text)
                out.flush()
            elif kind == b"bye":
                print(f"monarch-cy debug: {text}", file=err)
                return EXIT_OK
        now = time.monotonic()
        if not answered:
            if now - started > _ANSWER_TIMEOUT:
                print(f"monarch-cy debug: no answer from {address} within "
                      f"{_ANSWER_TIMEOUT:.0f} s (is the job running?)", file=err)
                return EXIT_FAILED
            continue
        if now - last_ping >= 1.0:
            sock.send_multipart([b"ping", b""])
            last_ping = now
        if stdin in events:
            data = os.read(stdin, 4096)
            if not data:
                return EXIT_OK              # end of input: the job releases its ranks
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                sock.send_multipart([b"line", line])
