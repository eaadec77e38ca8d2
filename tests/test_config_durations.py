"""monarch_cy._config_durations: humantime durations read and written as Monarch's
configuration does, and the text of a malformed one."""

from __future__ import annotations

import pytest

from monarch_cy._config_durations import format_duration, parse_duration


@pytest.mark.parametrize("text,seconds,normal", [
    ("30s", 30.0, "30s"), ("90s", 90.0, "1m 30s"), ("1h30m", 5400.0, "1h 30m"),
    ("1h 30m", 5400.0, "1h 30m"), ("500ms", 0.5, "500ms"), ("1.5s", 1.5, "1s 500ms"),
    ("10 s", 10.0, "10s"), ("2min", 120.0, "2m"), ("1d", 86400.0, "1day"),
    ("2days", 172800.0, "2days"), (" 3s ", 3.0, "3s"), ("0s", 0.0, "0s"),
])
def test_read_and_written_back(text, seconds, normal):
    assert parse_duration(text) == pytest.approx(seconds)
    assert format_duration(parse_duration(text)) == normal


@pytest.mark.parametrize("text,why", [
    ("invalid", "expected a number at position 0"), ("abc123", "expected a number"),
    ("30", "needs a unit"), ("1x", "unknown unit 'x'"), ("", "must not be empty"),
    ("1s 2", "needs a unit"), ("s", "expected a number"),
])
def test_malformed_durations_say_invalid_duration_format(text, why):
    with pytest.raises(ValueError) as ei:
        parse_duration(text)
    msg = str(ei.value)
    assert msg.startswith(f"Invalid duration format {text!r}: ") and why in msg


def test_infinite_and_nan():
    assert format_duration(float("inf")) == "inf" and format_duration(float("nan")) == "inf"
