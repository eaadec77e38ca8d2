"""The shared loader helper (``monarch_cy._loader``): candidate places, opening in
order, and the record of what was tried.  Nothing here binds a GPU library; the
loaders that use it have their own tests (test_runtime_loader.py,
collectives/test_nccl_nogpu.py)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from monarch_cy import _loader as L


def _touch(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return str(path)


def test_both_loaders_use_the_one_candidate_type():
    from monarch_cy import _runtime
    from monarch_cy._collectives import _nccl_loader

    assert _runtime.Candidate is _nccl_loader.Candidate is L.Candidate
    assert _runtime.unique_candidates is L.unique_candidates
    assert L.Candidate("cuda", "/x/libnccl.so.2", "torch").describe() == "torch: /x/libnccl.so.2 (cuda)"


def test_first_usable_records_every_refusal_in_order(tmp_path):
    """Each place that fails says why, in candidate order; the first usable one is
    returned with its handle and the probe's result, and nothing after it is tried."""
    junk = tmp_path / "libjunk.so.1"
    junk.write_text("not an ELF file")
    cands = [
        L.Candidate("cuda", "libabsent_for_test.so.9", "system"),
        L.Candidate("cuda", str(junk), "system"),
        L.Candidate("auto", "libm.so.6", "env"),          # opens; the probe refuses it
        L.Candidate("auto", "libc.so.6", "env"),          # opens; the probe accepts it
        L.Candidate("auto", "libabsent_after.so.1", "env"),
    ]
    probed = []

    def probe(c, lib):
        probed.append(c.location)
        if c.location == "libm.so.6":
            raise LookupError("missing symbols: cudaMalloc")
        return lib.getpid() > 0

    tried: list[str] = []
    found = L.first_usable(cands, probe, tried)
    assert found is not None
    c, lib, result = found
    assert c is cands[3] and isinstance(lib, ctypes.CDLL) and result is True
    assert probed == ["libm.so.6", "libc.so.6"]
    assert len(tried) == 3
    for cand, line in zip(cands, tried):
        assert line.startswith(cand.describe() + ": ")
    assert "cannot open" in tried[0] and "libabsent_for_test.so.9" in tried[0]
    assert "cannot open" in tried[1] and str(junk) in tried[1]
    assert tried[2] == "env: libm.so.6 (auto): opened but not usable (missing symbols: cudaMalloc)"


def test_first_usable_none_and_unexpected_errors(tmp_path):
    tried: list[str] = []
    assert L.first_usable([L.Candidate("cuda", str(tmp_path / "nope.so"), "env")],
                          lambda c, lib: None, tried) is None
    assert len(tried) == 1 and "cannot open" in tried[0]

    def broken(c, lib):
        raise RuntimeError("a bug, not a refusal")

    with pytest.raises(RuntimeError, match="a bug"):     # only `unusable` errors are refusals
        L.first_usable([L.Candidate("auto", "libc.so.6", "env")], broken, [])
    with pytest.raises(ValueError):                       # a loader narrows `unusable`
        L.first_usable([L.Candidate("auto", "libc.so.6", "env")],
                       lambda c, lib: int("x"), [], unusable=(LookupError,))


def test_already_loaded_is_reopened_never_loaded(tmp_path):
    """RTLD_NOLOAD: a copy in this process opens; one that is not mapped fails to open."""
    libc = next(p for p in L.loaded_files("libc.so") if os.path.exists(p))
    assert isinstance(L.open_candidate(L.Candidate("auto", libc, "already loaded")), ctypes.CDLL)
    with pytest.raises(OSError):
        L.open_candidate(L.Candidate("auto", "libz_absent_for_test.so.1", "already loaded"))


def test_system_candidates_sonames_then_toolkit_homes(monkeypatch, tmp_path):
    home, path = tmp_path / "cuda", tmp_path / "cuda-path"
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setenv("CUDA_PATH", str(path))
    a = _touch(home / "lib64" / "libx.so.2")
    b = _touch(home / "lib" / "libx.so.2")
    c = _touch(path / "lib64" / "libx.so.1")
    got = L.system_candidates("cuda", ("libx.so.2", "libx.so.1"))
    assert [x.location for x in got][:2] == ["libx.so.2", "libx.so.1"]      # the loader's path first
    assert [x.location for x in got][2:5] == [a, b, c]
    assert {x.source for x in got} == {"system"} and {x.platform for x in got} == {"cuda"}

    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    r = _touch(tmp_path / "rocm" / "lib" / "librx.so.1")
    assert [x.location for x in L.system_candidates("rocm", ("librx.so.1",))][:2] == ["librx.so.1", r]


def test_torch_platform_and_auto_order(tmp_path):
    t = tmp_path / "torch"
    t.mkdir()
    assert L.torch_platform(None) is None and L.torch_platform(t) is None
    (t / "version.py").write_text("cuda = None\nhip: Optional[str] = '6.2.41133'\n")
    assert L.torch_platform(t) == "rocm" and L.auto_platform_order(t) == ["rocm", "cuda"]
    (t / "version.py").write_text("cuda: Optional[str] = '13.0'\nhip = None\n")
    assert L.torch_platform(t) == "cuda" and L.auto_platform_order(t) == ["cuda", "rocm"]
    assert sorted(L.auto_platform_order(None)) == ["cuda", "rocm"]


def test_torch_lib_files_and_unique(tmp_path):
    t = tmp_path / "torch"
    f2 = _touch(t / "lib" / "libnccl.so.2")
    f1 = _touch(t / "lib" / "libnccl.so")
    _touch(t / "lib" / "libother.so")
    assert L.torch_lib_files(t, "libnccl.so*") == sorted([f1, f2])
    assert L.torch_lib_files(None, "libnccl.so*") == []
    alias = tmp_path / "alias"
    alias.symlink_to(t)
    dup = [L.Candidate("cuda", f2, "torch"), L.Candidate("cuda", str(alias / "lib" / "libnccl.so.2"), "pip wheel"),
           L.Candidate("rocm", f2, "torch"), L.Candidate("cuda", "libnccl.so.2", "system")]
    assert L.unique_candidates(dup) == [dup[0], dup[2], dup[3]]
