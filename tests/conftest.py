import importlib.util
import sys
from pathlib import Path

import pytest


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
