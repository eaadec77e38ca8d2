"""Log forwarding from workers to the controller."""

import re
import time


def _wait_for(capsys, needle, stream="out", timeout=5.0):
    seen = ""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        cap = capsys.readouterr()
        seen += getattr(cap, stream)
        if needle in seen:
            return seen
        time.sleep(0.02)
    return seen


def test_stdout_prefixed(echo, capsys):
    assert echo.slice(gpus=2).say.call_one("hello-out").get(10)
    assert "[echo] [2] hello-out" in _wait_for(capsys, "hello-out")


def test_stderr_and_logging(echo, capsys):
    echo.slice(gpus=1).say.call_one("to-err", "stderr").get(10)
    echo.slice(gpus=3).log.call_one("a-warning").get(10)
    err = _wait_for(capsys, "a-warning", "err")
    assert "[echo] [1] to-err" in err
    # a record logged in an actor names it (Monarch's prefix), after the line's own
    assert re.search(r"\[echo\] \[3\] \[actor=<root>\.<\S+Echo echo\{'gpus': 3/4\}>\] "
                     r"a-warning", err), err


def test_aggregation(procs, echo, capsys):
    procs.logging_option(stream_to_client=True, aggregate_window_sec=5.0)
    try:
        echo.say.call("same-line").get(10)
        echo.slice(gpus=0).say.call_one("only-zero").get(10)
        time.sleep(0.2)
        assert "same-line" not in capsys.readouterr().out    # held for the window
        procs.flush_logs()
        out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
        assert "[4 similar log lines] [echo ranks 0-3] same-line" in out
        assert out.count("same-line") == 1
        assert "[1 similar log lines] [echo 0] only-zero" in out
    finally:
        procs.logging_option(stream_to_client=True, aggregate_window_sec=None)


def test_stream_to_client_off(procs, echo, capsys):
    procs.logging_option(stream_to_client=False)
    try:
        echo.say.call("dropped-line").get(10)
        assert "dropped-line" not in capsys.readouterr().out
    finally:
        procs.logging_option(stream_to_client=True)
