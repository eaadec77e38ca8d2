"""Durations as Monarch's configuration writes them (humantime): ``"30s"``,
``"1m 30s"``, ``"500ms"``, ``"1h30m"``, ``"1.5s"``.

:func:`parse_duration` reads one (a sum of number-and-unit parts, spaces optional);
:func:`format_duration` writes seconds back in Monarch's normal form (``"1h 30m"``,
``"1s 500ms"``, ``"2days"``).  A malformed duration is a ``ValueError`` whose text
starts ``Invalid duration format '<text>':`` (Monarch's words, which programs
match) and says what is wrong.

Imports only the standard library.
"""

from __future__ import annotations

import re

__all__ = ["parse_duration", "format_duration"]

_UNITS = {}
for _names, _secs in ((("nsec", "ns"), 1e-9), (("usec", "us", "\u00b5s"), 1e-6),
                      (("msec", "ms"), 1e-3),
                      (("seconds", "second", "secs", "sec", "s"), 1.0),
                      (("minutes", "minute", "mins", "min", "m"), 60.0),
                      (("hours", "hour", "hrs", "hr", "h"), 3600.0),
                      (("days", "day", "d"), 86400.0),
                      (("weeks", "week", "w"), 604800.0),
                      (("months", "month", "M"), 2630016.0),
                      (("years", "year", "y"), 31557600.0)):
    for _n in _names:
        _UNITS[_n] = _secs
_NUMBER = re.compile(r"\s*(\d+(?:\.\d*)?)\s*")
_UNIT = re.compile(r"[A-Za-z\u00b5]+")


def _invalid(text: str, why: str) -> ValueError:
    return ValueError(f"Invalid duration format {text!r}: {why}")


def parse_duration(text: str) -> float:
    """Seconds in a humantime duration (``"1m 30s"``); ``ValueError`` otherwise."""
    s = text.strip()
    if not s:
        raise _invalid(text, "a duration must not be empty")
    pos, total = 0, 0.0
    while pos < len(s):
        m = _NUMBER.match(s, pos)
        if m is None:
            raise _invalid(text, f"expected a number at position {pos}, e.g. '30s', "
                                 "'500ms', '1m 30s'")
        u = _UNIT.match(s, m.end())
        if u is None:
            raise _invalid(text, "a number needs a unit after it (ns, us, ms, s, m, h, "
                                 "d, w, M, y), e.g. '30s' or '30ms'")
        if u.group() not in _UNITS:
            raise _invalid(text, f"unknown unit {u.group()!r} (use ns, us, ms, s, m, "
                                 "h, d, w, M or y)")
        total += float(m.group(1)) * _UNITS[u.group()]
        pos = u.end()
        while pos < len(s) and s[pos].isspace():
            pos += 1
    return total


def format_duration(seconds: float) -> str:
    """``seconds`` as Monarch prints a duration: ``"1h 30m"``, ``"1s 500ms"``,
    ``"2days"``, ``"0s"``."""
    if seconds != seconds or seconds == float("inf"):
        return "inf"
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    out = []
    for unit, size in (("day", 86400 * 10**9), ("h", 3600 * 10**9), ("m", 60 * 10**9),
                       ("s", 10**9), ("ms", 10**6), ("us", 10**3), ("ns", 1)):
        n, ns = divmod(ns, size)
        if n:
            out.append(f"{n}{unit}{'s' if unit == 'day' and n > 1 else ''}")
    return " ".join(out)
