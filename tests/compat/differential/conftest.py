"""What every differential test file shares: ``harness`` importable, and the
``reference`` fixture (skips, with the reason, where torchmonarch 0.7.0 is not installed)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402


@pytest.fixture(scope="session")
def reference():
    why = harness.reference_unavailable()
    if why:
        pytest.skip(why)
