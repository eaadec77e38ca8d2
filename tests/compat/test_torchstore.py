"""torchstore (PyTorch's tensor store built on Monarch), unchanged, on monarch_cy
through ``python -m monarch_cy.compat``.

The released torchstore on PyPI (0.1.2) is installed with ``pip install --no-deps
--target`` into a temporary folder (a few seconds; nothing goes into the
environment); where PyPI cannot be reached the tests skip with pip's reason.
torchstore's newer source (its tests included) is not on PyPI, so only the
released package is exercised here.

What 0.1.2 does on Monarch 0.7.0 and on monarch_cy alike:
- every module imports (the Monarch names it uses resolve through compat);
- ``torchstore.initialize()`` fails: its ``Controller`` actor mixes async and
  sync endpoints, which Monarch 0.7.0 refuses at spawn
  ("... mixes both async and sync endpoints.") and monarch_cy refuses the
  same way; the failure reaches the caller as an ``ActorError`` from the
  controller's ``get_or_spawn``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCHSTORE = "torchstore==0.1.2"
MODULES = [
    "torchstore", "torchstore.api", "torchstore.client", "torchstore.controller",
    "torchstore.logging", "torchstore.state_dict_utils", "torchstore.storage_volume",
    "torchstore.strategy", "torchstore.transport", "torchstore.transport.buffers",
    "torchstore.utils",
]


@pytest.fixture(scope="module")
def torchstore_path(tmp_path_factory):
    target = str(tmp_path_factory.mktemp("torchstore"))
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q",
           "--no-deps", "--no-compile", "--target", target, TORCHSTORE, "pygtrie"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot install {TORCHSTORE} from PyPI: {e}")
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"]
        pytest.skip(f"cannot install {TORCHSTORE} from PyPI: {tail[0]}")
    return target


def _run_compat(code: str, torchstore_path: str, timeout: int = 120):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (torchstore_path, ROOT, env.get("PYTHONPATH")) if p)
    env.setdefault("HOSTNAME", "localhost")     # torchstore's strategies read it
    return subprocess.run([sys.executable, "-m", "monarch_cy.compat", "-c", code],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def test_torchstore_imports(torchstore_path):
    code = textwrap.dedent(f"""
        import importlib, os
        for m in {MODULES!r}:
            mod = importlib.import_module(m)
            assert os.path.realpath(mod.__file__).startswith(
                os.path.realpath({torchstore_path!r})), mod.__file__
        import monarch.actor, monarch.rdma
        import monarch_cy
        assert monarch.actor.this_host is monarch_cy.actor.this_host
        print("IMPORTED", len({MODULES!r}))
    """)
    r = _run_compat(code, torchstore_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"IMPORTED {len(MODULES)}" in r.stdout


def test_torchstore_initialize_refuses_mixed_endpoints_like_monarch(torchstore_path):
    code = textwrap.dedent("""
        import asyncio
        import torchstore as ts
        from monarch.actor import ActorError

        async def main():
            try:
                await ts.initialize()
            except ActorError as e:
                print("ACTOR_ERROR", e)
            else:
                print("INITIALIZED")
                await ts.shutdown()

        asyncio.run(main())
    """)
    r = _run_compat(code, torchstore_path)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "ACTOR_ERROR" in r.stdout and "get_or_spawn" in r.stdout, out
    assert "mixes both async and sync endpoints" in out, out
    assert "Controller" in out, out
