"""shell() on this host: a real pty, the exit status, all output delivered, EOF and
hang-up (escalating to SIGKILL), and bad input refused with nothing left running."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from unittest import mock

import pytest

from monarch_cy.actor import ActorError, this_host
from monarch_cy.job import shell


class Terminal:
    """Pipes standing in for the user's terminal: ``sys.stdin``/``sys.stdout`` while
    ``run`` calls shell(); the output is read in a thread as it comes."""

    def __init__(self, typed: bytes, close_input: bool = True) -> None:
        self.in_r, self.in_w = os.pipe()
        self.out_r, self.out_w = os.pipe()
        os.write(self.in_w, typed)
        if close_input:
            self.close_input()
        self.output = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while data := os.read(self.out_r, 65536):
            self.output += data

    def close_input(self) -> None:
        if self.in_w is not None:
            os.close(self.in_w)
            self.in_w = None

    def run(self, **kwargs) -> int:
        with os.fdopen(self.in_r, "r") as stdin, os.fdopen(self.out_w, "w") as stdout, \
                mock.patch.object(sys, "stdin", stdin), \
                mock.patch.object(sys, "stdout", stdout):
            try:
                return shell(this_host(), **kwargs)
            finally:
                self.close_input()

    def text(self) -> str:
        self._reader.join(10)
        os.close(self.out_r)
        return self.output.decode(errors="replace")


def our_children() -> set:
    """Pids of this process's live children (the procs a shell spawns among them)."""
    me, kids = str(os.getpid()), set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if fields[1].decode() == me and fields[0] != b"Z":
            kids.add(int(pid))
    return kids


def no_new_children(before: set, timeout: float = 15) -> bool:
    """Whether every child started since ``before`` has exited (a stopped proc
    finalizes for a moment after its stop returned)."""
    deadline = time.monotonic() + timeout
    while not our_children() <= before:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False


def test_shell_runs_on_a_real_pty_and_returns_the_exit_status(tmp_path):
    term = Terminal(b'[ -t 0 ] && [ -t 1 ] && echo "pty:$(tty)"; echo "size:$(stty size)"; '
                    b'echo "env:$GREETING:${MONARCH_CY_JOB_SECRET:-no-secret}"; '
                    b'echo "pwd:$(pwd)"; exit 3\n')
    assert term.run(env={"GREETING": "hi"}, workdir=str(tmp_path)) == 3
    out = term.text()
    assert "pty:/dev/pts/" in out
    assert "size:24 80" in out                  # stdin is no terminal: the default size
    assert "env:hi:no-secret" in out            # the job's secret stays out of it
    assert f"pwd:{tmp_path}" in out


def test_shell_status_of_a_signal_and_output_all_delivered():
    term = Terminal(b"head -c 2000000 /dev/zero | tr '\\0' x; echo; kill -KILL $$\n")
    assert term.run() == 128 + 9
    assert term.text().count("x") >= 2_000_000


def test_shell_input_eof_at_the_prompt_ends_the_shell():
    term = Terminal(b"echo first\n")
    started = time.monotonic()
    assert term.run() == 0                      # ^D at the prompt: bash exits, status 0
    assert time.monotonic() - started < 8
    assert "first" in term.text()


def test_shell_hang_up_escalates_to_kill(tmp_path):
    """A foreground job that ignores SIGHUP and SIGTERM is killed; shell() returns and
    nothing of the session is left running."""
    pidfile = tmp_path / "pid"
    term = Terminal(f"sh -c 'trap \"\" HUP TERM; echo $$ > {pidfile}; exec sleep 60'\n"
                    .encode(), close_input=False)

    def close_when_started() -> None:
        deadline = time.monotonic() + 20
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
        term.close_input()
    threading.Thread(target=close_when_started, daemon=True).start()
    started = time.monotonic()
    status = term.run()
    assert status != 0
    assert time.monotonic() - started < 15
    pid = int(pidfile.read_text())
    assert not alive(pid)
    term.text()


def test_shell_from_inside_an_event_loop():
    term = Terminal(b"exit 5\n")

    async def main() -> int:
        return term.run()
    assert asyncio.run(main()) == 5
    term.text()


def test_shell_output_failure_is_raised_and_the_shell_hung_up():
    term = Terminal(b'echo "$$" ; sleep 30\n', close_input=False)
    os.close(term.out_r)                        # nobody reads the output
    term.out_r = os.open(os.devnull, os.O_RDONLY)
    before = our_children()
    with pytest.raises(BrokenPipeError):
        term.run()
    assert no_new_children(before)


# -- bad input: refused, nothing left running ------------------------------------------

class TwoHosts:
    spawned = False

    def size(self) -> int:
        return 2

    def spawn_procs(self, *a, **k):
        self.spawned = True
        raise AssertionError("shell() spawned procs on a mesh it refuses")


def test_shell_refuses_a_mesh_of_two_hosts():
    mesh = TwoHosts()
    with pytest.raises(ValueError, match="singleton HostMesh .*not a mesh of 2 hosts"):
        shell(mesh)
    assert not mesh.spawned


@pytest.mark.parametrize("kwargs, error, text", [
    ({"env": {"A": 1}}, TypeError, r"env must be a dict of str to str, not \{'A': 1\}"),
    ({"env": ["A=1"]}, TypeError, "env must be a dict"),
    ({"workdir": 7}, TypeError, "workdir must be a path, not 7"),
])
def test_shell_bad_arguments(kwargs, error, text):
    with pytest.raises(error, match=text):
        shell(this_host(), **kwargs)


def test_shell_missing_workdir_is_refused_and_nothing_left_running():
    before = our_children()
    term = Terminal(b"exit 0\n")
    with pytest.raises(ActorError, match="workdir '/nonexistent/dir' is not a directory"):
        term.run(workdir="/nonexistent/dir")
    term.text()
    assert no_new_children(before)


# -- a user at a terminal: the client's stdin and stdout are a pty too ---------------------

_AT_A_TERMINAL = r"""
import fcntl, sys, termios
fcntl.ioctl(0, termios.TIOCSCTTY, 0)        # this pty is our controlling terminal
from monarch_cy.actor import this_host
from monarch_cy.job import shell
status = shell(this_host())
canonical = bool(termios.tcgetattr(0)[3] & termios.ICANON)
print(f"status={status} canonical-again={canonical}", flush=True)
"""


class UserTerminal:
    """A pty whose slave is the client's terminal; we type at its master."""

    def __init__(self, rows: int, columns: int) -> None:
        import subprocess
        from monarch_cy._hosts.shell_session import set_window_size
        self.master, slave = os.openpty()
        set_window_size(self.master, rows, columns)
        self.proc = subprocess.Popen([sys.executable, "-c", _AT_A_TERMINAL], stdin=slave,
                                     stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.output = bytearray()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.output += data

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def wait_for(self, text: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.output:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                pytest.fail(f"{text!r} never appeared; the terminal shows:\n"
                            f"{self.output.decode(errors='replace')[-2000:]}")
            time.sleep(0.02)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        os.close(self.master)


def test_shell_at_a_terminal_raw_keys_window_size_and_restore():
    from monarch_cy._hosts.shell_session import set_window_size
    user = UserTerminal(40, 100)
    try:
        # arithmetic in the commands: the echo of what we type never matches
        user.type("echo ready-$((40+2))\r")
        user.wait_for("ready-42")
        user.type("echo size-$(stty size | tr ' ' x)\r")
        user.wait_for("size-40x100")
        set_window_size(user.master, 50, 120)      # the kernel sends SIGWINCH
        deadline = time.monotonic() + 10
        while b"size-50x120" not in user.output and time.monotonic() < deadline:
            user.type("echo size-$(stty size | tr ' ' x)\r")
            time.sleep(0.3)
        user.wait_for("size-50x120", 1)
        user.type("sleep 100\r")
        time.sleep(0.5)
        user.type("\x03")                          # ^C reaches the remote sleep
        user.type("echo interrupted-$((3+4))\r")
        user.wait_for("interrupted-7", 10)
        user.type("exit 4\r")
        user.wait_for("status=4 canonical-again=True")
        assert user.proc.wait(20) == 0
    finally:
        user.close()
