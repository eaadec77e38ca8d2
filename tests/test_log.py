"""monarch_cy._log: the runtime's messages go through logging, under ``monarch_cy``."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

_SNIPPET = (
    "from monarch_cy._log import logger\n"
    "log = logger('actor')\n"
    "log.debug('dbg %d', 1)\n"
    "log.info('inf %d', 2)\n"
    "log.error('err %d', 3)\n"
)


def _run(env_level):
    env = {"PATH": "/usr/bin:/bin"}
    import os
    env.update({k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "VIRTUAL"))})
    if env_level is not None:
        env["MONARCH_CY_LOG_LEVEL"] = env_level
    return subprocess.run([sys.executable, "-c", _SNIPPET], capture_output=True,
                          text=True, env=env, timeout=60)


def test_unset_level_prints_errors_bare_through_the_last_resort():
    r = _run(None)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "err 3\n"                # warnings and up, no prefix, nothing else


def test_level_set_adds_one_stderr_handler_with_name_and_level():
    r = _run("debug")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["monarch_cy.actor DEBUG: dbg 1",
                                     "monarch_cy.actor INFO: inf 2",
                                     "monarch_cy.actor ERROR: err 3"]


def test_bad_level_names_the_variable():
    r = _run("loud")
    assert r.returncode != 0
    assert "MONARCH_CY_LOG_LEVEL='loud' is not a log level" in r.stderr


def test_records_reach_the_programs_logging(caplog):
    from monarch_cy._log import logger
    with caplog.at_level(logging.WARNING, logger="monarch_cy"):
        logger("transport").warning("seen by %s", "caplog")
    # (a thread that used context() logs as Monarch's client: "[actor=<root>] " first)
    assert [(r.name, r.getMessage().removeprefix(getattr(r, "actor_prefix", "")))
            for r in caplog.records] == [("monarch_cy.transport", "seen by caplog")]


@pytest.mark.timeout(120)
def test_a_failing_cleanup_is_logged_by_the_actor_layer(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "from monarch_cy.actor import Actor, endpoint, this_host\n"
        "class A(Actor):\n"
        "    @endpoint\n"
        "    def ping(self):\n"
        "        return 1\n"
        "    def __cleanup__(self, exc):\n"
        "        raise RuntimeError('boom in cleanup')\n"
        "if __name__ == '__main__':\n"
        "    procs = this_host().spawn_procs(per_host={'procs': 1})\n"
        "    a = procs.spawn('a', A)\n"
        "    assert a.ping.call_one().get(30) == 1\n"
        "    procs.stop().get(30)\n")
    import os
    env = dict(os.environ, MONARCH_CY_LOG_LEVEL="warning")
    r = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True,
                       env=env, timeout=100)
    assert r.returncode == 0, r.stderr
    # logged while the actor runs: Monarch's [actor=...] prefix names it
    assert "monarch_cy.actor ERROR: [actor=<root>.<__main__.A a{'procs': 0/1}>] actor a[0]: " \
           "__cleanup__ failed: RuntimeError: boom in cleanup" in r.stderr, r.stderr
