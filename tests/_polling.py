"""Bounded waits for tests: poll a condition instead of sleeping a fixed time."""

from __future__ import annotations

import time


def wait_until(cond, timeout: float = 20.0, interval: float = 0.02) -> bool:
    """True as soon as ``cond()`` is truthy, False once ``timeout`` seconds passed."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(interval)
    return False
