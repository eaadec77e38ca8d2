"""Records logged inside an actor, or in a client thread that used ``context()``,
carry Monarch's ``[actor=...]`` prefix (``_actor/host/log_prefix.py``), and the controller's log sink prints held lines
when aggregation is switched off or its window shrinks (``log_sink.py``)."""

from __future__ import annotations

import io
import logging
import re
import types

import pytest

from monarch_cy._actor.base import state as _state
from monarch_cy._actor.host import log_prefix
from monarch_cy._actor.host.log_sink import LogSink


@pytest.fixture
def records():
    log_prefix.install()
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s|%(actor_prefix)s"))
    logger = logging.getLogger("monarch_cy_tests.log_prefix")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    yield logger, out
    logger.removeHandler(handler)
    _state.local.instance = None


def _as_actor(who):
    _state.local.instance = types.SimpleNamespace(host=types.SimpleNamespace(who=who))


def test_a_record_made_in_an_actor_names_it(records):
    logger, out = records
    _as_actor("<root>.<mod.Logger logger_1{'gpus': 0/2}>")
    logger.warning("hello %s", 1)
    logger.debug("")                      # torch.compile's structured-trace records
    assert out.getvalue().splitlines() == [
        "[actor=<root>.<mod.Logger logger_1{'gpus': 0/2}>] hello 1"
        "|[actor=<root>.<mod.Logger logger_1{'gpus': 0/2}>] ",
        "|[actor=<root>.<mod.Logger logger_1{'gpus': 0/2}>] "]


def _in_a_fresh_thread(fn):
    """Run ``fn`` in a new thread: a fresh context, where ``context()`` was never
    used."""
    import threading
    t = threading.Thread(target=fn)
    t.start()
    t.join()


def test_records_outside_actors_are_left_alone(records):
    logger, out = records
    logger.addFilter(lambda r: setattr(r, "actor_prefix", getattr(r, "actor_prefix", "-"))
                     or True)

    def body():
        logger.warning("plain")
        _state.local.instance = types.SimpleNamespace(host=None)     # the client
        logger.warning("client")
    _in_a_fresh_thread(body)
    assert out.getvalue().splitlines() == ["plain|-", "client|-"]


def test_a_client_thread_that_used_context_names_root_unless_switched_off(records):
    """As Monarch's: ``context()`` in a client thread sets its context there, and
    that thread's records then read ``[actor=<root>] ...``;
    ``monarch.actor.config.prefix_python_logs_with_actor = False`` turns every
    prefix off."""
    from monarch_cy.actor import config, context
    logger, out = records
    logger.addFilter(lambda r: setattr(r, "actor_prefix", getattr(r, "actor_prefix", "-"))
                     or True)

    def body():
        logger.warning("before")
        assert str(context().actor_instance) == "<root>"
        logger.warning("after")
        config.prefix_python_logs_with_actor = False
        try:
            logger.warning("off")
            _as_actor("<root>.<mod.A a>")
            logger.warning("actor off")
        finally:
            config.prefix_python_logs_with_actor = True
            _state.local.instance = None
    _in_a_fresh_thread(body)
    assert out.getvalue().splitlines() == [
        "before|-", "[actor=<root>] after|[actor=<root>] ", "off|-", "actor off|-"]


class _Node:
    def __init__(self):
        self.timers = []

    def add_timer(self, delay, fn):
        self.timers.append((delay, fn))


def _sink(capsys):
    sink = LogSink(_Node())
    capsys.readouterr()
    return sink


def _plain(text):
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_a_line_prints_as_who_then_rank(capsys):
    sink = _sink(capsys)
    sink.line(1, "stdout", "printer", 3, "single log line")
    sink.line(1, "stderr", "proc", 0, "from C")
    cap = capsys.readouterr()
    assert cap.out == "[printer] [3] single log line\n" and cap.err == "[proc] [0] from C\n"


def test_switching_aggregation_off_prints_what_is_held(capsys):
    sink = _sink(capsys)
    sink.set_option(1, True, 60.0)
    sink.set_option(2, True, 60.0)
    for rank in (0, 1, 0, 1):
        sink.line(1, "stdout", "printer", rank, "aggregated log line")
    sink.line(2, "stdout", "other", 0, "other mesh")
    assert capsys.readouterr().out == ""
    sink.set_option(1, True, None)
    sink.apply_window(1)
    out = _plain(capsys.readouterr().out)
    assert "[4 similar log lines] [printer ranks 0-1] aggregated log line" in out
    assert "other mesh" not in out                  # another mesh's window still runs
    sink.line(1, "stdout", "printer", 0, "single log line")
    assert capsys.readouterr().out == "[printer] [0] single log line\n"


def test_a_shorter_window_brings_the_deadline_forward(capsys, monkeypatch):
    sink = _sink(capsys)
    sink.set_option(1, True, 100.0)
    sink.line(1, "stdout", "printer", 0, "first batch")
    assert [d for d, _ in sink.node.timers] == [100.0]
    sink.set_option(1, True, 2.0)
    sink.apply_window(1)
    delay, fire = sink.node.timers[-1]
    assert delay == 2.0
    sink.line(1, "stdout", "printer", 1, "second batch")
    now = __import__("time").monotonic()
    monkeypatch.setattr("monarch_cy._actor.host.log_sink.time.monotonic", lambda: now + 2.0)
    fire()
    out = _plain(capsys.readouterr().out)
    assert "[1 similar log lines] [printer 0] first batch" in out
    assert "[1 similar log lines] [printer 1] second batch" in out
