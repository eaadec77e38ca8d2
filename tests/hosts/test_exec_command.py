"""exec_command(host_mesh, cmd): a command on every host of a mesh, the largest return
code back, the procs stopped whatever happened (monarch_cy._hosts.exec_command)."""

from __future__ import annotations

import os

import pytest

from monarch_cy.actor import this_host
from monarch_cy.job import exec_command


def test_the_largest_return_code_and_the_output(capsys):
    fut = exec_command(this_host(), ["sh", "-c", 'echo "out $MONARCH_SIZE_procs"; '
                                     'echo err >&2; exit $((3 + MONARCH_RANK_procs))'],
                       per_host={"procs": 2})
    assert fut.get(120) == 4                       # ranks 0 and 1: 3 and 4
    out, err = capsys.readouterr()
    assert out.count("out 2") == 2 and err.count("err") == 2


def test_nothing_runs_until_waited_for(tmp_path):
    marker = tmp_path / "ran"
    fut = exec_command(this_host(), ["touch", str(marker)])
    assert not marker.exists()
    assert fut.get(120) == 0 and marker.exists()


def test_env_workdir_and_output_dir(tmp_path, capsys):
    (tmp_path / "work").mkdir()
    out = tmp_path / "out"
    rc = exec_command(this_host(), ["sh", "-c", 'echo "$GREETING in $(pwd)"'],
                      env={"GREETING": "hi there"}, workdir=str(tmp_path / "work"),
                      output_dir=str(out)).get(120)
    assert rc == 0 and capsys.readouterr().out == ""         # written, not printed
    assert (out / "stdout.txt").read_text() == f"hi there in {tmp_path / 'work'}\n"


def test_a_python_script_runs_with_this_python(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text("import sys\nprint('args', sys.argv[1:])\nsys.exit(5)\n")
    rc = exec_command(this_host(), [str(script), "--lr", "1"]).get(120)
    assert rc == 5 and "args ['--lr', '1']" in capsys.readouterr().out


def test_the_procs_are_stopped_when_the_run_fails():
    """A failing endpoint call raises out of the Future after the stop ran."""
    class Procs:
        stopped = False

        def spawn(self, name, cls):
            raise RuntimeError("spawn failed here")

        def stop(self):
            from monarch_cy._actor.base.future import Future

            async def stop():
                Procs.stopped = True
            return Future._from_coro(stop())

    class Hosts:
        def spawn_procs(self, per_host=None):
            return Procs()
    with pytest.raises(RuntimeError, match="spawn failed here"):
        exec_command(Hosts(), ["true"]).get(30)
    assert Procs.stopped


@pytest.mark.parametrize("kw,exc,text", [
    ({"cmd": "ls -l"}, TypeError, "'ls -l'"),
    ({"cmd": []}, TypeError, "[]"),
    ({"cmd": ["ls", 3]}, TypeError, "3"),
    ({"cmd": ["ls"], "env": {"A": 1}}, TypeError, "'A': 1"),
    ({"cmd": ["ls"], "rank": 0, "point": {"hosts": 0}}, ValueError, "not both"),
])
def test_bad_arguments_are_refused_before_anything_starts(kw, exc, text):
    with pytest.raises(exc) as ei:
        exec_command(this_host(), **kw)
    assert text in str(ei.value)


def test_cwd_is_the_clients_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert exec_command(this_host(), ["pwd"]).get(120) == 0
    assert capsys.readouterr().out.strip() == os.fspath(tmp_path)
