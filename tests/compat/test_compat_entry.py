"""monarch_cy.compat: ``import monarch.*`` resolves to monarch_cy, and
``python -m monarch_cy.compat`` runs unmodified Monarch programs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")

pytestmark = pytest.mark.timeout(120)


def _env(*front: str) -> dict:
    """This environment, with ``front`` then the repo first on ``PYTHONPATH``."""
    old = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([*front, ROOT] + ([old] if old else [])))


def _default_sigint():
    """In the child: SIGINT back to its default.  A suite started in the background
    by a shell without job control inherits SIGINT ignored, and Python then never
    turns a Ctrl-C into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run(args, *, cwd=None, env=None, input=None, timeout=90):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          cwd=cwd or PROGRAMS, env=env or _env(), input=input,
                          timeout=timeout, preexec_fn=_default_sigint)


def _ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout


@pytest.fixture()
def compat():
    import monarch_cy.compat as c
    c.uninstall()
    yield c
    c.uninstall()


# -- install() in this process ----------------------------------------------------

def test_install_gives_monarch_cy_modules(compat):
    assert not compat.installed()
    compat.install()
    compat.install()                                   # idempotent
    assert compat.installed()
    assert sum(type(f).__name__ == "CompatFinder" for f in sys.meta_path) == 1

    import monarch
    import monarch.actor
    import monarch.job
    import monarch.rdma
    import monarch.spmd
    import monarch_cy.actor
    import monarch_cy.job
    import monarch_cy.rdma
    import monarch_cy.spmd
    assert monarch.actor is monarch_cy.actor
    assert monarch.rdma is monarch_cy.rdma
    assert monarch.job is monarch_cy.job
    assert monarch.spmd is monarch_cy.spmd
    assert monarch.actor.Actor is monarch_cy.actor.Actor
    assert sys.modules["monarch.actor"] is monarch_cy.actor
    # the targets keep their own identity: nothing of theirs was rewritten
    assert monarch_cy.actor.__name__ == "monarch_cy.actor"
    assert monarch_cy.actor.__spec__.name == "monarch_cy.actor"

    from monarch.actor import Actor, endpoint, this_host
    from monarch.rdma import RDMABuffer
    assert (Actor, endpoint, this_host) == (monarch_cy.actor.Actor,
                                            monarch_cy.actor.endpoint,
                                            monarch_cy.actor.this_host)
    assert RDMABuffer is monarch_cy.rdma.RDMABuffer
    assert monarch.Future is monarch_cy.actor.Future
    from monarch import actor
    assert actor is monarch_cy.actor


def test_install_again_after_import_keeps_objects(compat):
    compat.install()
    import monarch.actor
    first = monarch.actor
    compat.install()
    import monarch.actor as again
    assert again is first


@pytest.mark.parametrize("name", ["monarch._src.actor.allocator", "monarch.tensor_engine",
                                  "monarch._rust_bindings.monarch_extension",
                                  "monarch.job.meta"])
def test_private_module_clear_error(compat, name):
    compat.install()
    with pytest.raises(ImportError) as ei:
        __import__(name)
    msg = str(ei.value)
    assert "monarch_cy" in msg
    assert "public modules" in msg
    for public in ("monarch.actor", "monarch.rdma", "monarch.job", "monarch.spmd"):
        assert public in msg
    assert isinstance(ei.value, ModuleNotFoundError)


def test_from_import_of_private_name_fails(compat):
    compat.install()
    with pytest.raises(ImportError):
        exec("from monarch._src.actor.allocator import ProcessAllocator", {})
    import monarch
    with pytest.raises(AttributeError, match="provides only"):
        monarch.remote  # noqa: B018 - Monarch's tensor engine API


def test_uninstall(compat):
    compat.install()
    import monarch.actor  # noqa: F401
    compat.uninstall()
    assert not compat.installed()
    assert "monarch" not in sys.modules and "monarch.actor" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        import monarch  # noqa: F401
    import monarch_cy.actor
    assert monarch_cy.actor.Actor                      # still there


def test_import_is_cheap():
    code = ("import sys, monarch_cy.compat as c; c.install(shadow=True); "
            "import monarch; print(sorted(m for m in ('torch', 'zmq', 'importlib.metadata', "
            "'monarch_cy.actor') if m in sys.modules))")
    assert _ok(_run(["-c", code])).strip() == "[]"


# -- the real Monarch installed -------------------------------------------------------

@pytest.fixture()
def fake_real_monarch(tmp_path):
    """A folder with a ``torchmonarch`` dist-info and a ``monarch`` package."""
    dist = tmp_path / "torchmonarch-0.7.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torchmonarch\nVersion: 0.7.0\n")
    pkg = tmp_path / "monarch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("REAL = True\n")
    (pkg / "actor.py").write_text("REAL = True\n")
    return tmp_path


CHECK = textwrap.dedent("""
    import sys
    import monarch_cy.compat as c
    try:
        c.install()
    except RuntimeError as e:
        print("REFUSED", e)
    else:
        print("INSTALLED")
    print("INSTALLED?", c.installed())
    c.install(shadow=True)
    import monarch, monarch.actor, monarch_cy.actor
    print("REAL", hasattr(monarch, "REAL") or hasattr(monarch.actor, "REAL"))
    print("OURS", monarch.actor is monarch_cy.actor)
""")


def test_refuses_when_torchmonarch_installed(fake_real_monarch):
    out = _ok(_run(["-c", CHECK], env=_env(str(fake_real_monarch))))
    assert "REFUSED" in out and "torchmonarch" in out and "shadow=True" in out
    assert "INSTALLED? False" in out
    assert "REAL False" in out and "OURS True" in out      # shadow=True: ours wins


def test_refuses_when_only_a_monarch_package_is_importable(fake_real_monarch):
    import shutil
    shutil.rmtree(fake_real_monarch / "torchmonarch-0.7.0.dist-info")
    out = _ok(_run(["-c", CHECK], env=_env(str(fake_real_monarch))))
    assert "REFUSED" in out and str(fake_real_monarch / "monarch") in out
    assert "REAL False" in out and "OURS True" in out


def test_refuses_when_real_monarch_already_imported(fake_real_monarch):
    code = textwrap.dedent("""
        import monarch
        import monarch_cy.compat as c
        try:
            c.install(shadow=True)
        except RuntimeError as e:
            print("REFUSED", e)
    """)
    out = _ok(_run(["-c", code], env=_env(str(fake_real_monarch))))
    assert "REFUSED" in out and "already imported" in out


def test_cli_refuses_then_shadow(fake_real_monarch, tmp_path):
    script = tmp_path / "which.py"
    script.write_text("import monarch.actor, monarch_cy.actor\n"
                      "print('OURS', monarch.actor is monarch_cy.actor)\n")
    env = _env(str(fake_real_monarch))
    r = _run(["-m", "monarch_cy.compat", str(script)], env=env)
    assert r.returncode == 1, r
    assert "torchmonarch" in r.stderr and "--shadow" in r.stderr
    assert "Traceback" not in r.stderr
    assert "OURS True" in _ok(_run(["-m", "monarch_cy.compat", "--shadow", str(script)],
                                   env=env))


# -- python -m monarch_cy.compat -------------------------------------------------------

def test_cli_runs_script_with_actor(tmp_path):
    out = _ok(_run(["-m", "monarch_cy.compat", "spawn_script.py", "world", "--flag"],
                   cwd=PROGRAMS))
    script = os.path.join(PROGRAMS, "spawn_script.py")
    assert "ARGV ['world', '--flag']" in out
    assert f"ARGV0 {script}" in out
    assert f"FILE {script}" in out
    assert f"PATH0 {os.path.realpath(PROGRAMS)}" in out
    assert "SAME True" in out
    assert "RESULT ['hello, world', 'hello, world']" in out


def test_cli_script_from_another_folder(tmp_path):
    # sys.path[0] is the script's folder, not the current one
    out = _ok(_run(["-m", "monarch_cy.compat", os.path.join(PROGRAMS, "uses_helper.py"), "5"],
                   cwd=str(tmp_path)))
    assert "SUMS [105, 106]" in out


def test_helper_module_imports_monarch_in_workers():
    # helper_actors.py says "from monarch.actor import ...": the workers that
    # unpickle Adder import it, which needs monarch_cy.compat installed there too
    out = _ok(_run(["-m", "monarch_cy.compat", "uses_helper.py", "5"]))
    assert "SUMS [105, 106]" in out
    assert "WORKER_MONARCH_ACTOR ['monarch_cy.actor']" in out


def test_cli_dash_m_module():
    out = _ok(_run(["-m", "monarch_cy.compat", "-m", "compat_pkg.runme", "a", "-b"]))
    assert "NAME __main__" in out
    assert "ARGV ['a', '-b']" in out
    assert f"ARGV0 {os.path.join(PROGRAMS, 'compat_pkg', 'runme.py')}" in out
    assert "SUMS [3]" in out


def test_cli_missing_module():
    r = _run(["-m", "monarch_cy.compat", "-m", "no_such_module_xyz"])
    assert r.returncode == 1
    assert "No module named no_such_module_xyz" in r.stderr


def test_cli_missing_script(tmp_path):
    missing = tmp_path / "nope" / "missing.py"
    r = _run(["-m", "monarch_cy.compat", str(missing)])
    assert r.returncode == 2
    assert str(missing) in r.stderr and "can't open file" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_help_and_usage_errors():
    r = _run(["-m", "monarch_cy.compat", "--help"])
    assert r.returncode == 0 and "usage:" in r.stdout and "--shadow" in r.stdout
    r = _run(["-m", "monarch_cy.compat"])
    assert r.returncode == 2 and "usage:" in r.stderr
    r = _run(["-m", "monarch_cy.compat", "--bogus", "x.py"])
    assert r.returncode == 2 and "--bogus" in r.stderr


def test_cli_program_exit_code_and_traceback(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nimport monarch.actor\n"
                      "if sys.argv[1] == 'exit':\n    sys.exit(7)\n"
                      "raise ValueError('boom')\n")
    r = _run(["-m", "monarch_cy.compat", str(script), "exit"])
    assert r.returncode == 7
    r = _run(["-m", "monarch_cy.compat", str(script), "raise"])
    assert r.returncode == 1
    assert "ValueError: boom" in r.stderr
    assert f'File "{script}", line 5' in r.stderr
    assert "runpy" not in r.stderr and "compat/__main__.py" not in r.stderr


@pytest.mark.parametrize("source", [
    "import monarch.actor\nx = 1\ndef f(:\n    pass\n",                  # syntax error
    "import monarch.actor\ndef f():\n    raise KeyboardInterrupt\nf()\n",
    "import os, signal, time\nimport monarch.actor\n"                    # a real Ctrl-C
    "os.kill(os.getpid(), signal.SIGINT)\ntime.sleep(30)\n",
    "import monarch.actor\ndef f():\n    raise ValueError('boom')\nf()\n",
], ids=["syntax-error", "keyboard-interrupt", "sigint", "exception"])
def test_cli_reports_a_failing_script_as_plain_python_does(tmp_path, source):
    """Same report (the script's frames only: none of compat's or runpy's) and the
    same exit status as ``python script.py`` (with monarch importable as compat's)."""
    script = tmp_path / "fails.py"
    script.write_text(source)
    (tmp_path / "monarch").mkdir()                 # for plain python: a stand-in
    (tmp_path / "monarch" / "__init__.py").write_text("")
    (tmp_path / "monarch" / "actor.py").write_text("")
    plain = _run([str(script)], cwd=tmp_path)
    (tmp_path / "monarch" / "actor.py").unlink()
    (tmp_path / "monarch" / "__init__.py").unlink()
    (tmp_path / "monarch").rmdir()
    ours = _run(["-m", "monarch_cy.compat", str(script)], cwd=tmp_path)
    assert plain.returncode != 0 and ours.returncode == plain.returncode, ours.stderr
    assert ours.stderr == plain.stderr


def test_cli_private_import_error_message(tmp_path):
    script = tmp_path / "private.py"
    script.write_text("from monarch._src.actor.allocator import ProcessAllocator\n")
    r = _run(["-m", "monarch_cy.compat", str(script)])
    assert r.returncode == 1
    # a ModuleNotFoundError subclass, named in the traceback
    assert "ModuleNotProvidedError" in r.stderr and "public modules" in r.stderr
