import functools
import importlib.util
import os
import sys
from pathlib import Path

import pytest

# The suite's programs handle the failures they provoke by catching the call's
# SupervisionError: they run with monarch_cy's opt-in rule (a failure the program saw
# does not reach unhandled_fault_hook), set here before monarch_cy.actor is imported
# and inherited by the programs tests start.  Monarch's default rule is tested where
# it is named (tests that set fault_hook_skips_seen to False, and the differential
# tests, whose harness drops every MONARCH_CY_* variable).
os.environ.setdefault("MONARCH_CY_FAULT_HOOK_SKIPS_SEEN", "1")
# Sessions with failing procs leave no log folders behind (tests that need them set it).
os.environ.setdefault("MONARCH_CY_KEEP_FAILED_LOGS", "0")


def _fake_runtime_module():
    """tests/fake_runtime, imported by path (works whatever pytest's import mode)."""
    path = Path(__file__).with_name("fake_runtime") / "__init__.py"
    spec = importlib.util.spec_from_file_location("_monarch_cy_tests_fake_runtime", path)
    mod = sys.modules.get(spec.name)
    if mod is None:
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def fake_cudart(tmp_path_factory):
    """The test-only fake CUDA runtime (tests/fake_runtime), built once per session.

    Returns a ``FakeCudart``: ``.path`` of the shared library, ``.run(code, **env)``
    to run a snippet against it in a fresh interpreter.  Skips where no C
    compiler exists.
    """
    fr = _fake_runtime_module()
    if fr.compiler() is None:
        pytest.skip("no C compiler (gcc or $CC) to build the fake CUDA runtime")
    return fr.FakeCudart(fr.build(tmp_path_factory.mktemp("fake_cudart")))


# -- the `gpu` marker: real devices only; without one, each such test skips with
# the reason (hardware is a marker, not a folder: GPU tests live beside the tests
# of the module they test).

@functools.lru_cache(maxsize=1)
def _gpu_absent_reason():
    try:
        from monarch_cy import _runtime
        from monarch_cy.gpu import device_count

        _runtime.ensure_bound()
        n = device_count()
    except Exception as e:  # noqa: BLE001 - the reason is the message
        return f"no GPU: {str(e).splitlines()[0]}"
    return None if n > 0 else "no GPU: the runtime sees 0 devices"


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") is not None:
        reason = _gpu_absent_reason()
        if reason:
            pytest.skip(reason)


# -- real RDMA verbs: a session fixture booting the soft-RoCE guest once, used by
# tests/verbs and tests/rdma_buffer (defined here so both folders share one boot).
from _rdma_guest import rdma_guest  # noqa: E402,F401
