"""The debugger through real terminals: the controller script runs under a pty
(pexpect) as a user would run it, and ``monarch-cy debug`` in a second pty.

Scenarios: break, list, attach to rank 2, print a local, step, continue, the call
returns its value; two ranks paused (``breakpoint()`` and ``pdb.set_trace()``)
listed by rank, a command cast to both, ``continue``; a second terminal attaches,
``detach`` leaves the rank paused, ``quit`` (or the client dying) continues it;
bad input: a wrong secret is refused, a job with no paused session says so, an
unknown rank names the paused ones.  Every wait is bounded (pexpect timeouts).
"""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import sys

import pytest

pexpect = pytest.importorskip("pexpect")

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCRIPT = str(HERE / "_debugee.py")
T = 60          # seconds: any single expected line (spawning 4 procs on a busy host)
PDB = r"\(Pdb\) "
PROMPT = "monarch_dbg> "


def _env(tmp_path, **extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["TERM"] = "dumb"
    env["MONARCH_CY_RUN_DIR"] = str(tmp_path)
    for k in ("MONARCH_CY_DEBUG_CONSOLE", "MONARCH_DEBUG_SERVER_PORT", "PYTHONBREAKPOINT",
              "MONARCH_CY_JOB_SECRET", "MONARCH_CY_JOB_SECRET_FILE"):
        env.pop(k, None)
    env.update(extra)
    return env


def _spawn(args, env, cwd=None):
    child = pexpect.spawn(sys.executable, args, env=env, encoding="utf-8", timeout=T,
                          cwd=cwd or str(HERE), dimensions=(50, 200))
    child.logfile_read = _Tee()
    return child


class _Tee:
    """What a child printed, for the failure report (pytest shows captured stdout)."""

    def write(self, s):
        sys.stdout.write(s)

    def flush(self):
        pass


def _close(*children):
    for c in children:
        if c is not None and c.isalive():
            c.kill(signal.SIGKILL)
        if c is not None:
            c.close(force=True)


def _controller(tmp_path, ranks, *args, **env):
    return _spawn([SCRIPT, ranks, *args], _env(tmp_path, **env))


def _client(tmp_path, pid, *args, **env):
    return _spawn(["-m", "monarch_cy", "debug", "--job", str(pid), *args],
                  _env(tmp_path, **env), cwd=str(ROOT))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_break_list_attach_print_step_continue_on_the_controllers_terminal(tmp_path):
    c = _controller(tmp_path, "2")
    try:
        c.expect("MONARCH DEBUGGER")
        c.expect(PROMPT)
        c.sendline("list")
        c.expect(r"\| debugee +\| 2 +\| \{'gpus': 2\} .*\| _debugee.to_debug \|")
        c.expect(PROMPT)
        c.sendline("attach debugee 2")
        c.expect("Attached to debug session for debugee 2")
        c.expect(r"_debugee.py\(\d+\)to_debug\(\)\r\n-> if markdir:")
        c.expect(PDB)
        c.sendline("p secret_local")
        c.expect(r"\r\n20\r\n")
        c.expect(PDB)
        c.sendline("n")                          # one step
        c.expect(r"-> return rank \+ secret_local")
        c.expect(PDB)
        c.sendline("c")
        c.expect("Detached from debug session for debugee 2")
        c.expect(r"RESULT \[0, 11, 22, 33\]")
        c.expect(pexpect.EOF)
    finally:
        _close(c)


def test_two_ranks_paused_are_listed_by_rank_and_a_cast_reaches_both(tmp_path):
    c = _controller(tmp_path, "3,1")
    try:
        c.expect(PROMPT)
        # Both pause (rank 1 with pdb.set_trace, rank 3 with breakpoint()) in any order.
        for _ in range(40):
            c.sendline("list")
            c.expect(PROMPT)
            if "| 3 " in c.before:
                break
            c.expect(pexpect.TIMEOUT, timeout=0.5)
        rows = [ln for ln in c.before.splitlines() if ln.startswith("| debugee")]
        assert [r.split("|")[2].strip() for r in rows] == ["1", "3"], c.before
        c.sendline("cast debugee ranks(1,3) p secret_local + 1")
        c.expect(r"\[debugee 1\] 11\r\n")
        c.expect(r"\[debugee 3\] 31\r\n")
        c.expect(PROMPT)
        c.sendline("cast debugee ranks(0:2) p rank")        # a range: only rank 1 is paused
        c.expect(r"\[debugee 1\] 1\r\n")
        c.expect(PROMPT)
        c.sendline("continue")
        c.expect(r"Continued 2 session\(s\)")
        c.expect(r"RESULT \[0, 11, 22, 33\]")
        c.expect(pexpect.EOF)
    finally:
        _close(c)


def test_second_terminal_attaches_detach_keeps_quit_continues(tmp_path):
    c = _controller(tmp_path, "2", str(tmp_path), MONARCH_CY_DEBUG_CONSOLE="off")
    d = None
    try:
        c.expect(r"debugee rank 2 is paused at a breakpoint at _debugee.to_debug:\d+; "
                 r"attach with: monarch-cy debug --job (\d+)")
        d = _client(tmp_path, c.match.group(1))
        d.expect(PROMPT)
        d.sendline("attach debugee 7")
        d.expect("no debug session for rank 7 of actor debugee; its paused ranks are 2")
        d.expect(PROMPT)
        d.sendline("attach 2")
        d.expect(PDB)
        d.sendline("p secret_local")
        d.expect(r"\r\n20\r\n")
        d.expect(PDB)
        d.sendline("detach")
        d.expect("Detached from debug session for debugee 2")
        d.expect(PROMPT)
        d.sendline("list")                       # detached: still paused
        d.expect(r"\| debugee +\| 2 ")
        d.expect(PROMPT)
        assert not (tmp_path / "rank2").exists()
        d.sendline("quit")                       # the only debugger leaves: rank 2 runs on
        d.expect(pexpect.EOF)
        d.close()
        assert d.exitstatus == 0
        c.expect(r"RESULT \[0, 11, 22, 33\]")
        assert (tmp_path / "rank2").exists()
    finally:
        _close(c, d)


def test_a_debugger_that_dies_lets_the_paused_rank_continue(tmp_path):
    c = _controller(tmp_path, "2", MONARCH_CY_DEBUG_CONSOLE="off")
    d = None
    try:
        c.expect(r"attach with: monarch-cy debug --job (\d+)")
        d = _client(tmp_path, c.match.group(1))
        d.expect(PROMPT)
        d.sendline("attach 2")
        d.expect(PDB)
        d.kill(signal.SIGKILL)                   # no bye: the server notices the silence
        c.expect(r"RESULT \[0, 11, 22, 33\]", timeout=T)
    finally:
        _close(c, d)


def test_a_wrong_secret_is_refused_and_the_job_stays_paused(tmp_path):
    port = _free_port()
    c = _controller(tmp_path, "2", MONARCH_CY_DEBUG_CONSOLE="off",
                    MONARCH_DEBUG_SERVER_PORT=str(port))
    bad = good = None
    try:
        c.expect(r"attach with: monarch-cy debug --job (\d+)")
        pid = c.match.group(1)
        bad = _spawn(["-m", "monarch_cy", "debug", "--port", str(port)],
                     _env(tmp_path, MONARCH_CY_JOB_SECRET="ab" * 32), cwd=str(ROOT))
        bad.expect(f"tcp://localhost:{port} refused this connection: the job secret is "
                   "not that job's")
        bad.expect(pexpect.EOF)
        bad.close()
        assert bad.exitstatus == 1
        assert "MONARCH DEBUGGER" not in bad.before
        c.expect("debug client from .* refused: it does not hold the job secret")
        # The job is untouched: the right secret (found on this machine) attaches.
        good = _client(tmp_path, pid, "--port", str(port))
        good.expect(PROMPT)
        good.sendline("continue")
        good.expect(r"Continued 1 session\(s\)")
        c.expect(r"RESULT \[0, 11, 22, 33\]")
    finally:
        _close(c, bad, good)


def test_a_job_with_no_paused_session_says_so(tmp_path):
    c = _controller(tmp_path, "idle")
    d = None
    try:
        c.expect(r"READY (\d+)")
        d = _client(tmp_path, c.match.group(1))
        d.expect("There are no paused debug sessions in this job yet.")
        d.expect(PROMPT)
        d.sendline("list")
        d.expect("No paused debug sessions in this job.")
        d.expect(PROMPT)
        d.sendline("attach 0")
        d.expect("no actor is paused in this job")
        d.expect(PROMPT)
        d.sendline("quit")
        d.expect(pexpect.EOF)
        c.sendline("")
        c.expect(pexpect.EOF)
    finally:
        _close(c, d)


def test_no_job_serves_a_debugger(tmp_path):
    d = _spawn(["-m", "monarch_cy", "debug", "--job", "999999999"], _env(tmp_path),
               cwd=str(ROOT))
    try:
        d.expect("no job with controller pid 999999999 serves a debugger")
        d.expect(pexpect.EOF)
        d.close()
        assert d.exitstatus == 1
    finally:
        _close(d)


def _list_until(c, actor: str, n: int, tries: int = 120) -> list:
    """``list`` at the prompt until ``n`` sessions of ``actor`` are listed (ranks pause
    in any order; at most ``tries`` times, half a second apart); the table's rows."""
    rows = []
    for _ in range(tries):
        c.sendline("list")
        c.expect(PROMPT)
        rows = [ln for ln in c.before.splitlines() if ln.startswith(f"| {actor}")]
        if len(rows) >= n:
            break
        c.expect(pexpect.TIMEOUT, timeout=0.5)
    return rows


def test_monarchs_debugging_example_under_compat(tmp_path):
    """Monarch's docs example, unchanged (tests/compat/monarch_examples): 16 ranks
    pause; attach, step into the helper, print, detach; cast by ranks and by
    dimensions; continue.  Ranks 2, 6, 10, 14 then raise ValueError('bad rank') and
    pause post-mortem where they raised, as in Monarch: listed, attached, inspected;
    continued, the call fails with it."""
    example = ROOT / "tests" / "compat" / "monarch_examples" / "debugging.py"
    c = _spawn(["-m", "monarch_cy.compat", str(example)], _env(tmp_path), cwd=str(tmp_path))
    try:
        c.expect(PROMPT)
        # The 16 ranks reach breakpoint() in any order: list until every one is paused.
        rows = _list_until(c, "debugee", 16)
        assert [int(r.split("|")[2]) for r in rows] == list(range(16)), c.before
        assert "{'host': 3, 'gpu': 1}" in rows[13]
        c.sendline("attach debugee 13")
        c.expect(r"-> return _debugee_actor_internal\(rank\)")
        c.expect(PDB)
        c.sendline("s")
        c.expect("--Call--")
        c.expect(PDB)
        c.sendline("n")
        c.expect(r"-> if rank % 4 == 0:")
        c.expect(PDB)
        c.sendline("rank")
        c.expect(r"\r\n13\r\n")
        c.expect(PDB)
        c.sendline("detach")
        c.expect(PROMPT)
        c.sendline("cast debugee ranks(0,1) n")
        c.expect(r"\[debugee 0\] > .*\(61\)to_debug\(\)->1")
        c.expect(r"\[debugee 1\] > .*\(61\)to_debug\(\)->3")
        c.expect(PROMPT)
        c.sendline("cast debugee ranks(host=2:4, gpu=1:3) p rank")
        for r in (9, 10, 13, 14):
            c.expect(rf"\[debugee {r}\] {r}\r\n")
        c.expect(PROMPT)
        c.sendline("continue")
        c.expect(PROMPT)
        # Ranks 2, 6, 10, 14 raise after their breakpoint: each pauses post-mortem
        # where it raised (Monarch's), listed again; a second continue fails the call.
        rows = _list_until(c, "debugee", 4)
        assert [int(r.split("|")[2]) for r in rows] == [2, 6, 10, 14], c.before
        assert all("_bad_rank" in r for r in rows), c.before
        c.sendline("attach debugee 6")
        c.expect(PDB)
        c.sendline("p rank")                  # the frame that raised: _bad_rank's caller
        c.expect(PDB)
        c.sendline("up")
        c.expect(PDB)
        c.sendline("p rank")
        c.expect(r"\r\n9\r\n")                # rank 6 + 3, as the helper computed
        c.expect(PDB)
        c.sendline("detach")
        c.expect(PROMPT)
        c.sendline("continue")
        c.expect("ValueError: bad rank")
        c.expect(pexpect.EOF)
    finally:
        _close(c)
