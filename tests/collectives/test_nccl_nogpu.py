"""NCCL loading and the no-GPU error paths, with pip's nvidia-nccl-cu13 on a CPU machine.

Each test that binds runs in a fresh interpreter (the loader and the shim hold
process-wide state).  Skips where no NCCL library can be found at all.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from monarch_cy.collectives import NcclError, NcclUnavailable

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, **env) -> str:
    import os

    e = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout.strip()


@pytest.fixture(scope="module")
def nccl_available():
    out = _run("""
        from monarch_cy._collectives import _nccl_loader as L
        try:
            print(L.ensure_loaded().path)
        except Exception as e:
            print("NONE", e)
    """)
    if out.startswith("NONE"):
        pytest.skip(f"no NCCL library: {sys.executable} -m pip install nvidia-nccl-cu13 ({out})")
    return out


def test_version_unique_id_and_init_failure(nccl_available):
    out = _run("""
        import pickle
        from monarch_cy import _nccl_shim as s
        from monarch_cy._collectives import _nccl_loader as L
        from monarch_cy.collectives import NcclError, UniqueId
        b = L.ensure_loaded()
        assert b.version == s.getVersion() >= 21300, b
        a, c = s.getUniqueId(), s.getUniqueId()
        assert len(a) == 128 and a != c and any(a)
        u = UniqueId.generate()
        assert pickle.loads(pickle.dumps(u)) == u
        try:
            s.commInitRank(1, a, 0)
        except NcclError as e:
            err = pickle.loads(pickle.dumps(e))
            assert err.result == e.result != 0 and err.call == "CommInitRank" and err.name.startswith("nccl")
            print("INITFAIL", e.name, "|", e.last_error)
        else:
            raise AssertionError("commInitRank succeeded without a GPU")
        print("SOURCE", b.source, b.library, b.version_text)
    """)
    assert "INITFAIL ncclUnhandledCudaError" in out or "INITFAIL nccl" in out
    assert "SOURCE" in out


def test_communicator_without_gpu_fails_cleanly(nccl_available):
    out = _run("""
        from monarch_cy.errors import MonarchCyError
        from monarch_cy.collectives import NcclCommunicator, UniqueId, make_group, default_backend
        u = UniqueId.generate()
        try:
            NcclCommunicator(0, 1, u, timeout=5)
        except MonarchCyError as e:
            print("CLEAN", type(e).__name__)
        print("DEFAULT", default_backend())
    """)
    assert "CLEAN" in out and "DEFAULT gloo" in out


def test_shim_argument_checks(nccl_available):
    out = _run("""
        from monarch_cy import _nccl_shim as s
        from monarch_cy._collectives import _nccl_loader as L
        L.ensure_loaded()
        for call, exc in [
            (lambda: s.commInitRank(1, b"x" * 127, 0), ValueError),
            (lambda: s.commInitRank(1, "x" * 128, 0), TypeError),
            (lambda: s.allReduce(-1, 0, 1, 7, 0, 1, 0), ValueError),
            (lambda: s.allReduce(0, 0, -5, 7, 0, 1, 0), ValueError),
            (lambda: s.allReduce(0, 0, 1, 7, 0, 0, 0), ValueError),
            (lambda: s.commCount(1.5), TypeError),
            (lambda: s.has("NoSuchThing"), ValueError),
        ]:
            try:
                call()
            except exc:
                pass
            else:
                raise AssertionError(call)
        assert s.has("CommSplit") and s.has("CommInitRankConfig")
        assert s.getErrorString(4)
        print("OK")
    """)
    assert out == "OK"


def test_unbound_shim_raises_unavailable():
    out = _run("""
        from monarch_cy import _nccl_shim as s
        from monarch_cy.collectives import NcclUnavailable
        try:
            s.getVersion()
        except NcclUnavailable as e:
            print("UNBOUND", "not bound" in str(e))
    """)
    assert out == "UNBOUND True"


def test_explicit_missing_library_lists_what_was_tried():
    out = _run("""
        import pickle
        from monarch_cy._collectives import _nccl_loader as L
        from monarch_cy.collectives import NcclUnavailable
        try:
            L.ensure_loaded()
        except NcclUnavailable as e:
            e2 = pickle.loads(pickle.dumps(e))
            print(len(e2.tried), "/nonexistent/libnccl.so.2" in str(e2))
    """, MONARCH_CY_NCCL_LIBRARY="/nonexistent/libnccl.so.2")
    assert out == "1 True"


def test_minimum_version_is_enforced(nccl_available):
    out = _run("""
        from monarch_cy._collectives import _nccl_loader as L
        from monarch_cy.collectives import NcclUnavailable
        L.MIN_VERSION = (9, 0, 0)
        try:
            L.ensure_loaded()
        except NcclUnavailable as e:
            print("OLD", "older than the minimum supported 9.0.0" in str(e))
    """)
    assert out == "OLD True"


def test_search_order_puts_pip_wheel_last(nccl_available):
    out = _run("""
        from monarch_cy._collectives import _nccl_loader as L
        print([c.source for c in L.candidates()])
    """)
    sources = eval(out)  # noqa: S307 - our own repr
    assert sources and sources[-1] == "pip wheel" and "system" in sources
    assert sources.index("system") < sources.index("pip wheel")


def test_gpu_switched_off():
    out = _run("""
        from monarch_cy._collectives import _nccl_loader as L
        from monarch_cy.collectives import NcclUnavailable
        try:
            L.ensure_loaded()
        except NcclUnavailable as e:
            print("OFF", "switched off" in str(e))
    """, MONARCH_CY_GPU_PLATFORM="none")
    assert out == "OFF True"


def test_version_code_roundtrip():
    from monarch_cy._collectives._nccl_loader import version_code, version_tuple

    assert version_code(2, 28, 3) == 22803 and version_tuple(22803) == (2, 28, 3)
    assert version_code(2, 8, 4) == 2804 and version_tuple(2804) == (2, 8, 4)
    assert version_tuple(21304) == (2, 13, 4)


def test_nccl_error_pickles_with_attributes():
    e = NcclError(6, "remote process exited", "peer 3 closed", "AllReduce")
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.result, e2.name, e2.message, e2.last_error, e2.call) == (
        6, "ncclRemoteError", "remote process exited", "peer 3 closed", "AllReduce")
    assert str(e2) == str(e) and "ncclAllReduce" in str(e)
    assert NcclError(42).name == "nccl result 42"
    u = NcclUnavailable("none", ("a", "b"))
    assert pickle.loads(pickle.dumps(u)).tried == ("a", "b")
