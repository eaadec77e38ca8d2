"""Type hints deep enough for Monarch-style code: mypy accepts a correct program and
rejects wrong argument and result types (mypy runs in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(300)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GOOD = '''
from monarch_cy.actor import (Accumulator, Actor, Channel, Future, Port, PortReceiver,
                              ValueMesh, endpoint, this_host)


class Counter(Actor):
    def __init__(self) -> None:
        self.n = 0

    @endpoint
    def incr(self, k: int) -> int:
        self.n += k
        return self.n

    @endpoint
    async def name(self) -> str:
        return "counter"

    @endpoint(explicit_response_port=True)
    def produce(self, port: Port[int], n: int) -> None:
        port.send(n)


def main() -> None:
    procs = this_host().spawn_procs(per_host={"procs": 2})
    counter: Counter = procs.spawn("c", Counter)
    one: Future[int] = counter.incr.call_one(1)
    total: int = one.get()
    every: ValueMesh[int] = counter.incr.call(1).get()
    first: int = every.get(0)
    label: str = counter.name.call_one().get()
    acc: Future[int] = Accumulator(counter.incr, 0, lambda a, b: a + b).accumulate(2)
    port, recv = Channel[int].open()
    got: Future[int] = recv.recv()
    print(total, first, label, acc, port, got)
'''

BAD = '''
from monarch_cy.actor import Actor, endpoint, this_host


class Counter(Actor):
    @endpoint
    def incr(self, k: int) -> int:
        return k


def main() -> None:
    counter: Counter = this_host().spawn_procs().spawn("c", Counter)
    counter.incr.call_one("one")
    wrong: str = counter.incr.call_one(1).get()
'''


def _mypy(tmp_path, name, text):
    pytest.importorskip("mypy")
    path = tmp_path / name
    path.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(tmp_path / ".mypy_cache"), str(path)],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
        env=dict(os.environ, MYPYPATH=ROOT))


def test_mypy_accepts_monarch_style_code(tmp_path):
    r = _mypy(tmp_path, "good.py", GOOD)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_rejects_wrong_types(tmp_path):
    r = _mypy(tmp_path, "bad.py", BAD)
    assert r.returncode == 1, r.stdout + r.stderr
    assert 'incompatible type "str"; expected "int"' in r.stdout, r.stdout
    assert 'expression has type "int", variable has type "str"' in r.stdout, r.stdout
