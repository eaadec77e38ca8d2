"""GPU tests: real devices only.  Without one, each test skips with the reason."""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def _gpu_absent_reason() -> str | None:
    try:
        from monarch_cy import _runtime
        from monarch_cy.gpu import device_count

        _runtime.ensure_bound()
        n = device_count()
    except Exception as e:  # noqa: BLE001 - the reason is the message
        return f"no GPU: {str(e).splitlines()[0]}"
    return None if n > 0 else "no GPU: the runtime sees 0 devices"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") is not None:
        reason = _gpu_absent_reason()
        if reason:
            pytest.skip(reason)
