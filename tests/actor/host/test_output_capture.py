"""Every byte of a proc's fds 1 and 2 reaches the controller with its rank, its log
file and its failure (monarch_cy._actor.launch.proc_output)."""

import glob
import logging
import os
import re
import time

import pytest

from _actors import Writer
import monarch_cy.actor as api
from monarch_cy.actor import SupervisionError, this_host
from monarch_cy.config import configured

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _wait_for(capsys, needles, stream="out", timeout=10.0):
    """What the controller printed to ``stream`` so far in this test, once it holds
    every needle (or after ``timeout``); the other stream is kept for a later call."""
    seen = capsys.__dict__.setdefault("_seen", {"out": "", "err": ""})
    end = time.monotonic() + timeout
    while True:
        cap = capsys.readouterr()
        seen["out"] += cap.out
        seen["err"] += cap.err
        if all(n in seen[stream] for n in needles) or time.monotonic() > end:
            return seen[stream]
        time.sleep(0.02)


@pytest.fixture(scope="module")
def wprocs():
    pm = this_host().spawn_procs(per_host={"gpus": 4})
    yield pm
    pm.stop().get(10)


@pytest.fixture(scope="module")
def writer(wprocs):
    return wprocs.spawn("writer", Writer)


def test_os_write_reaches_the_controller_with_its_rank(writer, capsys):
    writer.slice(gpus=2).fd_write.call_one(1, "raw-fd-one\n").get(10)
    writer.slice(gpus=3).fd_write.call_one(2, "raw-fd-two\n").get(10)
    assert "[proc] [2] raw-fd-one" in _wait_for(capsys, ["raw-fd-one"])
    assert "[proc] [3] raw-fd-two" in _wait_for(capsys, ["raw-fd-two"], "err")


def test_c_level_writes_reach_the_controller(writer, capsys):
    writer.slice(gpus=1).c_write.call_one("from-libc").get(10)
    out = _wait_for(capsys, ["from-libc", "from-libc-printf"])
    assert "[proc] [1] from-libc\n" in out
    assert "[proc] [1] printf from-libc-printf" in out


def test_a_child_process_output_reaches_the_controller(writer, capsys):
    writer.slice(gpus=0).child.call_one("kid").get(10)
    assert "[proc] [0] kid-out" in _wait_for(capsys, ["kid-out"])
    assert "[proc] [0] kid-err" in _wait_for(capsys, ["kid-err"], "err")


def test_a_procs_lines_keep_their_order(writer, capsys):
    """print (through sys.stdout) and os.write, alternating, arrive in order."""
    writer.slice(gpus=1).interleave.call_one(200).get(10)
    out = _wait_for(capsys, ["seq 199"])
    got = [int(m) for m in re.findall(r"\] seq (\d+)", out)]
    assert got == list(range(200))
    assert "[writer] [1] seq 0" in out and "[proc] [1] seq 1" in out


def test_aggregation_folds_identical_lines(capsys):
    pm = this_host().spawn_procs(per_host={"gpus": 8})
    try:
        w = pm.spawn("agg", Writer)
        pm.logging_option(stream_to_client=True, aggregate_window_sec=30)
        w.say.call("the same line").get(10)
        w.slice(gpus=5).say.call_one("only five").get(10)
        time.sleep(0.2)
        assert "the same line" not in capsys.readouterr().out    # held for the window
        pm.flush_logs()
        out = ANSI.sub("", capsys.readouterr().out)
        assert out.count("the same line") == 1, out
        assert "[8 similar log lines] [agg ranks 0-7] the same line" in out
        assert "[1 similar log lines] [agg 5] only five" in out
        assert out.startswith(">>> Aggregated Logs (") and "<<< Aggregated Logs (" in out
    finally:
        pm.stop().get(10)


def test_aggregate_window_needs_streaming(wprocs):
    with pytest.raises(ValueError, match="aggregate_window_sec=3 needs stream_to_client"):
        wprocs.logging_option(stream_to_client=False, aggregate_window_sec=3)
    with pytest.raises(ValueError, match="between 0 and 255, not 300"):
        wprocs.logging_option(level=300)
    with pytest.raises(TypeError, match="level must be a logging level"):
        wprocs.logging_option(level="INFO")


def test_level_sets_the_procs_root_logger(wprocs, writer, capsys):
    try:
        writer.slice(gpus=0).log.call_one(logging.INFO, "info-at-default").get(10)
        assert "[writer] [0] [actor=<root>.<_actors.Writer writer{'gpus': 0/4}>] " \
            "info-at-default" in _wait_for(capsys, ["info-at-default"], "err")
        wprocs.logging_option(level=logging.ERROR).get(10)
        writer.slice(gpus=0).log.call_one(logging.WARNING, "filtered-warning").get(10)
        writer.slice(gpus=0).log.call_one(logging.ERROR, "kept-error").get(10)
        err = _wait_for(capsys, ["kept-error"], "err")
        assert "[writer] [0] [actor=" in err and "kept-error" in err
        assert "filtered-warning" not in err
    finally:
        wprocs.logging_option(level=logging.INFO).get(10)


def test_stream_to_client_off_still_writes_the_file(wprocs, writer, capsys):
    wprocs.logging_option(stream_to_client=False)
    try:
        writer.slice(gpus=2).fd_write.call_one(1, "quiet-line\n").get(10)
        wprocs.flush_logs()
        assert "quiet-line" not in capsys.readouterr().out
    finally:
        wprocs.logging_option(stream_to_client=True)
    from monarch_cy._actor.base.state import get_node
    files = glob.glob(os.path.join(get_node().rundir, "logs", "procs-*.2.log"))
    assert any("[proc 2] quiet-line" in open(f).read() for f in files), files


@pytest.fixture
def hook(monkeypatch):
    """The fault hook's failures (Monarch's rule: seen failures reach it too)."""
    got = []
    monkeypatch.setattr(api, "unhandled_fault_hook", got.append)
    monkeypatch.setattr(api, "fault_hook_skips_seen", False)
    return got


def test_a_killed_proc_has_its_last_lines_in_the_failure(hook, capsys):
    from monarch_cy._actor.base.state import get_node
    pm = this_host().spawn_procs(per_host={"gpus": 2}, name="dying")
    w = pm.spawn("w", Writer)
    with pytest.raises(SupervisionError) as ei:
        w.slice(gpus=1).last_words.call_one("famous last words").get(10)
    text = str(ei.value)
    assert "failed: Killed(sig=9)" in text
    tail = text[text.index("the last "):]
    assert "[w 1] famous last words" in tail
    assert "[proc 1] famous last words-from-c" in tail
    assert "[w 1] no newline at the end" in tail
    # the lines were printed before the failure was reported
    assert "[w] [1] famous last words" in capsys.readouterr().out
    assert _until(lambda: hook)
    assert "[w 1] famous last words" in hook[0].report()
    # the log file is in the run directory and outlives the failure and the stop
    path = os.path.join(get_node().rundir, "logs", f"dying-{pm._state.mesh_id}.1.log")
    pm.stop().get(10)
    with open(path) as f:
        logged = f.read()
    assert "[w 1] famous last words\n" in logged
    assert os.path.exists(os.path.join(get_node().rundir, "logs", ".failed"))


def test_tail_log_lines_sets_the_tail_length(hook):
    with configured(tail_log_lines=1):
        pm = this_host().spawn_procs(per_host={"gpus": 1}, name="short_tail")
    w = pm.spawn("w", Writer)
    with pytest.raises(SupervisionError) as ei:
        w.last_words.call_one("cut").get(10)
    text = str(ei.value)
    assert "the last line it wrote" in text, text
    assert "[w 0] no newline at the end" in text and "cut-from-c" not in text, text
    assert _until(lambda: hook)
    pm.stop().get(10)


def _until(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False


KEEP_PROGRAM = """
import sys
sys.path.insert(0, {actor_tests!r})
import monarch_cy.actor as api
from monarch_cy.actor import this_host
from _actors import Writer
api.unhandled_fault_hook = lambda failure: None
pm = this_host().spawn_procs(per_host={{"gpus": 1}}, name="kept")
w = pm.spawn("w", Writer)
try:
    w.last_words.call_one("kept words").get(10)
except Exception as e:
    print("FAILED", type(e).__name__)
pm.stop().get(10)
"""


def test_log_files_outlive_the_run_after_a_failure(tmp_path):
    """A controller that saw a proc fail keeps the procs' log files at exit, out of
    its run directory (MONARCH_CY_KEEP_FAILED_LOGS)."""
    import subprocess
    import sys
    from _paths import ACTOR_TESTS
    env = dict(os.environ, TMPDIR=str(tmp_path), MONARCH_CY_KEEP_FAILED_LOGS="1",
               MONARCH_CY_FAULT_HOOK_SKIPS_SEEN="0")
    env.pop("MONARCH_CY_RUN_DIR", None)
    r = subprocess.run([sys.executable, "-c", KEEP_PROGRAM.format(
        actor_tests=str(ACTOR_TESTS))], env=env, capture_output=True, text=True,
        timeout=60)
    assert "FAILED SupervisionError" in r.stdout, (r.stdout, r.stderr)
    kept = glob.glob(str(tmp_path / "monarch_cy-logs-*" / "kept-*.0.log"))
    assert kept, (os.listdir(tmp_path), r.stderr)
    assert "[w 0] kept words" in open(kept[0]).read()
    assert "is kept in" in r.stderr
    assert not glob.glob(str(tmp_path / "mcy-*")), "the run directory stayed"


def test_tail_default_is_twenty_lines_and_monarchs_zero_under_compat(monkeypatch):
    """Unset, a failure carries 20 lines; in a Monarch program (compat installed),
    Monarch's default: none, so its failure texts stay Monarch's."""
    from monarch_cy._actor.launch import proc_output
    monkeypatch.delenv("MONARCH_CY_TAIL_LOG_LINES", raising=False)
    import monarch_cy.compat as compat
    monkeypatch.setattr(compat, "installed", lambda: False)
    assert proc_output.tail_lines() == 20
    monkeypatch.setattr(compat, "installed", lambda: True)
    assert proc_output.tail_lines() == 0
    monkeypatch.setenv("MONARCH_CY_TAIL_LOG_LINES", "3")
    assert proc_output.tail_lines() == 3
