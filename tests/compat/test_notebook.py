"""Monarch programs with no script file: a Jupyter notebook (a real ipykernel
kernel driven by nbclient), ``python -c`` and ``python -`` (program on stdin).

Their actor classes and lambdas live in ``__main__`` with no file behind it, so
they reach the workers by value.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL = "monarch-cy-compat-test"


def _pythonpath() -> str:
    old = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join([ROOT] + ([old] if old else []))


# -- a notebook -----------------------------------------------------------------------

CELLS = [
    "%load_ext monarch_cy.compat",
    """\
    import sys
    import monarch_cy.compat
    from monarch.actor import Actor, current_rank, endpoint, this_host
    print("EXE", sys.executable)
    print("INSTALLED", monarch_cy.compat.installed())""",
    """\
    class Counter(Actor):
        def __init__(self, start):
            self.n = start

        @endpoint
        def incr(self, by=1):
            self.n += by
            return self.n

        @endpoint
        def rank(self):
            return current_rank().rank

        @endpoint
        def apply(self, fn):
            return fn(self.n)""",
    """\
    procs = this_host().spawn_procs(per_host={"procs": 2})
    counters = procs.spawn("counters", Counter, 10)""",
    'print("INCR", sorted(counters.incr.call(5).get(60).values()))',
    'print("RANKS", sorted(counters.rank.call().get(60).values()))',
    """\
    offset = 100
    print("LAMBDA", sorted(counters.apply.call(lambda n: n * 2 + offset).get(60).values()))""",
    """\
    # the cell above, edited and run again: the new class is the one sent
    class Counter(Actor):
        def __init__(self, start):
            self.n = -start

        @endpoint
        def incr(self, by=1):
            self.n -= by
            return self.n

    again = procs.spawn("counters2", Counter, 10)
    print("REDEFINED", sorted(again.incr.call(1).get(60).values()))""",
    """\
    # workers' output, Python's and the fd's, shows in the cell that made the call
    import os

    class Talker(Actor):
        @endpoint
        def talk(self, word):
            print(f"PY-{word}")
            os.write(1, f"FD-{word}\\n".encode())
            return True

    talkers = procs.spawn("talkers", Talker)
    talkers.talk.call("first").get(60)""",
    'talkers.talk.call("second").get(60)',
    """\
    procs.stop().get(30)
    print("STOPPED")""",
]


def _kernel_spec(tmp_path) -> None:
    """A kernel spec that runs this interpreter (``sys.executable``)."""
    d = tmp_path / "jupyter" / "kernels" / KERNEL
    d.mkdir(parents=True)
    (d / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "monarch_cy compat test",
        "language": "python",
        "env": {"PYTHONPATH": _pythonpath()},
    }))


def _stdout(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream" and o.get("name") == "stdout":
            out.append(o["text"])
        elif o.get("output_type") == "error":
            out.append("ERROR " + o["ename"] + ": " + o["evalue"])
    return "".join(out)


@pytest.mark.timeout(240)
def test_notebook(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    _kernel_spec(tmp_path)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("PYTHONPATH", _pythonpath())

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(c)) for c in CELLS]
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name=KERNEL,
                                     resources={"metadata": {"path": str(tmp_path)}})
    failed = None
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        failed = re.sub(r"\x1b\[[0-9;]*m", "", str(e))    # without the terminal colours
    if failed is not None:
        pytest.fail(f"a notebook cell failed:\n{failed}", pytrace=False)
    outs = [_stdout(c) for c in nb.cells]
    text = "\n".join(outs)
    assert f"EXE {sys.executable}" in outs[1], text
    assert "INSTALLED True" in outs[1], text
    assert "INCR [15, 15]" in outs[4], text
    assert "RANKS [0, 1]" in outs[5], text
    assert "LAMBDA [130, 130]" in outs[6], text
    assert "REDEFINED [-11, -11]" in outs[7], text
    assert "[talkers] [0] PY-first" in outs[8] and "[proc] [1] FD-first" in outs[8], text
    assert "[talkers] [1] PY-second" in outs[9] and "[proc] [0] FD-second" in outs[9], text
    assert "first" not in outs[9], text
    assert "STOPPED" in outs[10], text
    assert "ERROR" not in text, text


# -- python -c and python - ---------------------------------------------------------

PROGRAM = """\
import sys
{setup}
from monarch.actor import Actor, endpoint, this_host


class Squarer(Actor):
    @endpoint
    def square(self, x):
        return x * x

    @endpoint
    def apply(self, fn, x):
        return fn(x)


print("ARGV", sys.argv)
procs = this_host().spawn_procs(per_host={{"procs": 2}})
squarers = procs.spawn("squarers", Squarer)
print("SQUARES", sorted(squarers.square.call(int(sys.argv[1])).get(30).values()))
print("LAMBDA", sorted(squarers.apply.call(lambda v: v + 1, 41).get(30).values()))
procs.stop().get(10)
"""

INSTALL = "import monarch_cy.compat\nmonarch_cy.compat.install()"

CASES = {
    # plain python: the program calls install() itself
    "python -c": (["-c", PROGRAM.format(setup=INSTALL)], None, "['-c', '3']"),
    "python -": (["-"], PROGRAM.format(setup=INSTALL), "['-', '3']"),
    # the compat runner: the program is unmodified Monarch code
    "compat -c": (["-m", "monarch_cy.compat", "-c", PROGRAM.format(setup="")], None,
                  "['-c', '3']"),
    "compat -": (["-m", "monarch_cy.compat", "-"], PROGRAM.format(setup=""), "['-', '3']"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(CASES))
def test_program_without_a_file(case, tmp_path):
    args, stdin, argv = CASES[case]
    r = subprocess.run([sys.executable, *args, "3"], input=stdin, capture_output=True,
                       text=True, timeout=90, cwd=str(tmp_path),
                       env=dict(os.environ, PYTHONPATH=_pythonpath()))
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert f"ARGV {argv}" in r.stdout
    assert "SQUARES [9, 9]" in r.stdout
    assert "LAMBDA [42, 42]" in r.stdout
