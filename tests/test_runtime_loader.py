"""The run-time loader (``monarch_cy._runtime``): where it looks, in which order,
what it reuses, and how it fails.

Candidate-ordering tests run in this process: ``candidates()`` only looks at
files, environment and ``/proc/self/maps`` (monkeypatched here to fixed
answers), and loads nothing.  Anything that binds runs in a fresh interpreter
against the fake CUDA runtime (tests/fake_runtime), because the shim's table is
process-wide and a loaded library never goes away.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from monarch_cy import _hip_shim, _runtime as rt
from monarch_cy._platform_tables import CUDA13

SOURCE_RANK = {"env": 0, "already loaded": 1, "torch": 2, "system": 3, "pip wheel": 4}


@pytest.fixture
def clean(monkeypatch, tmp_path):
    """A loader that sees nothing: no env settings, no torch, nothing mapped, no pip
    wheels, empty CUDA_HOME / ROCM_PATH.  Tests add back what they need."""
    for var in (rt.ENV_LIBRARY, rt.ENV_PLATFORM, "CUDA_HOME", "CUDA_PATH", "ROCM_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(rt, "_torch_dir", lambda: None)
    monkeypatch.setattr(rt, "_loaded_runtimes", lambda: [])
    monkeypatch.setattr(rt, "_site_dirs", lambda: [])
    return tmp_path


def _touch(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return str(path)


def _ranks_non_decreasing(cands) -> bool:
    ranks = [SOURCE_RANK[c.source] for c in cands]
    return ranks == sorted(ranks)


# ------------------------------------------------------------------ candidates


def test_env_library_is_the_only_candidate(clean, monkeypatch):
    """MONARCH_CY_GPU_RUNTIME_LIBRARY names the one place tried, platform read later."""
    monkeypatch.setenv(rt.ENV_LIBRARY, "/opt/x/libwhatever.so")
    monkeypatch.setattr(rt, "_loaded_runtimes", lambda: [("cuda", "/somewhere/libcudart.so.13")])
    assert rt.candidates() == [rt.Candidate("auto", "/opt/x/libwhatever.so", "env")]


def test_platform_none_gives_no_candidates(clean, monkeypatch):
    """MONARCH_CY_GPU_PLATFORM=none switches GPU support off: nothing is a candidate,
    not even an explicit library or one already loaded."""
    monkeypatch.setenv(rt.ENV_PLATFORM, "none")
    monkeypatch.setenv(rt.ENV_LIBRARY, "/opt/x/libcudart.so.13")
    monkeypatch.setattr(rt, "_loaded_runtimes", lambda: [("cuda", "/somewhere/libcudart.so.13")])
    assert rt.requested_platform() == "none"
    assert rt.candidates() == []


@pytest.mark.parametrize("value", ["tpu", "CUDA13", "rocm,cuda"])
def test_unknown_platform_value_raises_valueerror_naming_it(clean, monkeypatch, value):
    """An unknown MONARCH_CY_GPU_PLATFORM raises ValueError quoting the value and the
    accepted ones, from requested_platform() and candidates() alike."""
    monkeypatch.setenv(rt.ENV_PLATFORM, value)
    for fn in (rt.requested_platform, rt.candidates):
        with pytest.raises(ValueError) as ei:
            fn()
        assert repr(value) in str(ei.value) and "cuda, rocm, none" in str(ei.value)


def test_platform_values_are_case_and_space_insensitive(clean, monkeypatch):
    """' CUDA ' and 'Auto' are accepted as cuda and auto."""
    monkeypatch.setenv(rt.ENV_PLATFORM, " CUDA ")
    assert rt.requested_platform() == "cuda"
    monkeypatch.setenv(rt.ENV_PLATFORM, "Auto")
    assert rt.requested_platform() == "auto"


def test_shim_bind_rejects_unknown_platform():
    """The shim's bind() refuses a platform other than cuda/rocm, naming it, before
    touching the table."""
    was = _hip_shim.is_bound()
    with pytest.raises(ValueError, match="'tpu'"):
        _hip_shim.bind("tpu", [1] * len(_hip_shim.function_names()), CUDA13)
    assert _hip_shim.is_bound() == was


def test_system_order_for_cuda(clean, monkeypatch):
    """cuda: libcudart.so.13 before .12, then CUDA_HOME's files, then pip's wheels;
    no ROCm candidate at all."""
    home = clean / "cuda"
    in_home = _touch(home / "lib64" / "libcudart.so.13")
    site = clean / "site"
    wheel = _touch(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setattr(rt, "_site_dirs", lambda: [site])
    monkeypatch.setenv(rt.ENV_PLATFORM, "cuda")
    cands = rt.candidates()
    locs = [c.location for c in cands]
    assert {c.platform for c in cands} == {"cuda"}
    assert locs[:2] == ["libcudart.so.13", "libcudart.so.12"]
    assert locs.index(in_home) > 1
    assert locs[-1] == wheel and cands[-1].source == "pip wheel"
    assert _ranks_non_decreasing(cands)


def test_system_order_for_rocm(clean, monkeypatch):
    """rocm: libamdhip64.so.7, .6, .5 in that order, then ROCM_PATH's files; no CUDA
    candidate and no pip wheel (there are none for HIP)."""
    home = clean / "rocm"
    in_home = _touch(home / "lib" / "libamdhip64.so.6")
    monkeypatch.setenv("ROCM_PATH", str(home))
    monkeypatch.setattr(rt, "_site_dirs", lambda: [clean])
    _touch(clean / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    monkeypatch.setenv(rt.ENV_PLATFORM, "rocm")
    cands = rt.candidates()
    assert {c.platform for c in cands} == {"rocm"}
    assert [c.location for c in cands[:3]] == ["libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"]
    assert in_home in [c.location for c in cands]
    assert all(c.source == "system" for c in cands)


def _fake_torch(root: Path, flavour: str) -> Path:
    """A directory shaped like an installed torch, built for ``flavour``."""
    torch_dir = root / "site" / "torch"
    (torch_dir / "lib").mkdir(parents=True)
    line = {"cuda": "cuda = '13.0'\nhip = None", "rocm": "cuda = None\nhip = '6.2.4'"}[flavour]
    (torch_dir / "version.py").write_text(f"__version__ = '2.13.0'\n{line}\n")
    return torch_dir


def test_torch_rocm_goes_first_then_system_then_wheels(clean, monkeypatch):
    """auto with a ROCm torch: torch's bundled libamdhip64 first, then the system's
    ROCm sonames, then CUDA's, then pip wheels; sources never go back up the order."""
    torch_dir = _fake_torch(clean, "rocm")
    bundled = _touch(torch_dir / "lib" / "libamdhip64.so")
    monkeypatch.setattr(rt, "_torch_dir", lambda: torch_dir)
    site = clean / "site2"
    wheel = _touch(site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12")
    monkeypatch.setattr(rt, "_site_dirs", lambda: [site])
    cands = rt.candidates()
    assert cands[0] == rt.Candidate("rocm", bundled, "torch")
    plats = [c.platform for c in cands if c.source == "system"]
    assert plats == sorted(plats, key=lambda p: p != "rocm") and set(plats) == {"rocm", "cuda"}
    assert cands[-1] == rt.Candidate("cuda", wheel, "pip wheel")
    assert _ranks_non_decreasing(cands)


def test_torch_cuda_wheel_runtime_comes_before_system(clean, monkeypatch):
    """auto with a CUDA torch: the nvidia wheel next to torch (where a CUDA torch
    loads its runtime from) is a torch candidate, ahead of every system soname, and
    CUDA goes before ROCm."""
    torch_dir = _fake_torch(clean, "cuda")
    beside = _touch(torch_dir.parent / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    monkeypatch.setattr(rt, "_torch_dir", lambda: torch_dir)
    cands = rt.candidates()
    assert cands[0] == rt.Candidate("cuda", beside, "torch")
    system = [c for c in cands if c.source == "system"]
    assert system[0].platform == "cuda" and system[-1].platform == "rocm"
    assert _ranks_non_decreasing(cands)


def test_already_loaded_runtime_is_first_and_blocks_other_copies(clean, monkeypatch):
    """A runtime already mapped in the process is the first candidate, and no other
    copy of that platform (torch's, system, pip) is offered after it."""
    torch_dir = _fake_torch(clean, "cuda")
    _touch(torch_dir.parent / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    monkeypatch.setattr(rt, "_torch_dir", lambda: torch_dir)
    monkeypatch.setattr(rt, "_site_dirs", lambda: [torch_dir.parent])
    monkeypatch.setattr(rt, "_loaded_runtimes", lambda: [("cuda", "/x/lib/libcudart.so.13")])
    cands = rt.candidates()
    assert cands[0] == rt.Candidate("cuda", "/x/lib/libcudart.so.13", "already loaded")
    assert [c for c in cands if c.platform == "cuda"] == cands[:1]
    monkeypatch.setenv(rt.ENV_PLATFORM, "cuda")
    assert rt.candidates() == cands[:1]


def test_duplicates_by_real_path_are_dropped(clean, monkeypatch):
    """The same file reached twice (a symlink) is offered once."""
    site = clean / "site"
    real = _touch(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    os.symlink(site, clean / "alias")
    monkeypatch.setattr(rt, "_site_dirs", lambda: [site, clean / "alias"])
    monkeypatch.setenv(rt.ENV_PLATFORM, "cuda")
    wheels = [c for c in rt.candidates() if c.source == "pip wheel"]
    assert [c.location for c in wheels] == [real]


# ------------------------------------------------------------------ binding (subprocesses)


def test_already_loaded_copy_is_reused_not_loaded_again(fake_cudart, tmp_path):
    """With a libcudart.so.13 already loaded (as torch would have), ensure_bound()
    binds that very copy (source "already loaded"): no second libcudart is mapped,
    and an allocation made through the shim shows in the preloaded copy's counters."""
    copy = tmp_path / "preloaded" / "libcudart.so.13"
    copy.parent.mkdir()
    copy.write_bytes(fake_cudart.path.read_bytes())
    out = fake_cudart.run(
        """
        pre = ctypes.CDLL(os.environ["PRELOAD"])
        cands = [c.describe() for c in rt.candidates()]
        b = rt.ensure_bound()
        p = shim.malloc(64)
        seen = pre.fake_live_allocations()
        shim.free(p)
        maps = sorted({l.split()[-1] for l in open("/proc/self/maps")
                       if "libcudart" in l or "fake_cudart" in l or "amdhip" in l})
        emit({"source": b.source, "path": b.path, "cands": cands, "maps": maps, "seen": seen,
              "after": pre.fake_live_allocations()})
        """,
        bind=False,
        PRELOAD=str(copy),
    )
    assert out["source"] == "already loaded"
    assert out["path"] == str(copy)
    assert out["cands"][0].startswith(f"already loaded: {copy} (cuda)")
    assert out["maps"] == [str(copy)]
    assert (out["seen"], out["after"]) == (1, 0)


def test_system_soname_binds_and_reports_the_resolved_file(fake_cudart, tmp_path):
    """A bare soname found through the loader's path binds (source "system") and the
    binding reports the file the dynamic loader actually opened."""
    libdir = tmp_path / "syslib"
    libdir.mkdir()
    (libdir / "libcudart.so.13").write_bytes(fake_cudart.path.read_bytes())
    out = fake_cudart.run(
        """
        rt._torch_dir = lambda: None        # a CUDA torch's runtime would come first
        b = rt.ensure_bound()
        emit({"source": b.source, "path": b.path, "version": b.version, "n": shim.getDeviceCount(),
              "tried": list(b.tried)})
        """,
        bind=False,
        LD_LIBRARY_PATH=str(libdir),
        MONARCH_CY_GPU_PLATFORM="cuda",
        FAKE_CUDART_DEVICES="3",
    )
    assert out["source"] == "system"
    assert out["path"] == str(libdir / "libcudart.so.13")
    assert out["version"] == 13000 and out["n"] == 3
    assert out["tried"] == [f"system: libcudart.so.13 (cuda): bound"]


def test_nothing_bindable_lists_every_place_tried(fake_cudart, tmp_path):
    """When no candidate binds, GpuRuntimeUnavailable says so and lists every place
    tried with why it failed: missing file, a file that is not a library, a library
    lacking symbols; one line per candidate, in candidate order."""
    partial_c = tmp_path / "partial.c"
    partial_c.write_text(
        "int cudaMalloc(void **p, unsigned long n) { (void)p; (void)n; return 0; }\n"
        "int cudaRuntimeGetVersion(int *v) { *v = 13000; return 0; }\n"
    )
    site = tmp_path / "site"
    wheel = site / "nvidia" / "cu13" / "lib" / "libcudart.so.13"
    wheel.parent.mkdir(parents=True)
    subprocess.run([shutil.which(os.environ.get("CC", "gcc")), "-shared", "-fPIC", "-o", str(wheel), str(partial_c)], check=True)
    home = tmp_path / "cuda"
    junk = home / "lib64" / "libcudart_absent_for_test.so.13"
    junk.parent.mkdir(parents=True)
    junk.write_text("not an ELF file")
    out = fake_cudart.run(
        """
        from pathlib import Path
        rt._torch_dir = lambda: None
        rt._site_dirs = lambda: [Path(os.environ["SITE"])]
        rt._SONAMES = {"cuda": ("libcudart_absent_for_test.so.13",),
                       "rocm": ("libamdhip64_absent_for_test.so.7",)}
        cands = [c.describe() for c in rt.candidates()]
        e = err(rt.ensure_bound)
        ex = pickle.loads(bytes.fromhex(e["pickle"]))
        emit({"cands": cands, "e": e, "tried": list(ex.tried), "bound": shim.is_bound()})
        """,
        bind=False,
        SITE=str(site),
        CUDA_HOME=str(home),
        ROCM_PATH=str(tmp_path / "no-rocm"),
        MONARCH_CY_GPU_PLATFORM="cuda",
    )
    e, tried, cands = out["e"], out["tried"], out["cands"]
    assert e["type"] == "GpuRuntimeUnavailable" and out["bound"] is False
    assert e["text"].startswith("no GPU runtime (libcudart or libamdhip64) could be bound")
    assert "MONARCH_CY_GPU_PLATFORM=cuda" in e["text"] and "Places tried, in order:" in e["text"]
    assert len(tried) == len(cands) == 3
    for cand, line in zip(cands, tried):
        assert line.startswith(cand + ": ") and line in e["text"]
    assert "cannot open" in tried[0] and "libcudart_absent_for_test.so.13" in tried[0]
    assert "cannot open" in tried[1] and str(junk) in tried[1]
    assert str(wheel) in tried[2] and "opened but not usable (missing symbols: cudaGetDeviceCount" in tried[2]


@pytest.mark.parametrize(
    "env, expect",
    [
        ({"MONARCH_CY_GPU_PLATFORM": "none"}, "switched off (MONARCH_CY_GPU_PLATFORM=none)"),
        ({"MONARCH_CY_GPU_PLATFORM": "rocm"}, "it is a cuda runtime, but MONARCH_CY_GPU_PLATFORM=rocm"),
        ({"FAKE_CUDART_VERSION": "11080"}, "older than 12.0"),
        ({"MONARCH_CY_GPU_RUNTIME_LIBRARY": "libm.so.6"}, "exports neither cudaMalloc nor hipMalloc"),
        ({"MONARCH_CY_GPU_RUNTIME_LIBRARY": "/nonexistent/libcudart.so.13"}, "cannot open"),
    ],
    ids=["none", "wrong-platform", "too-old", "not-a-runtime", "missing-file"],
)
def test_unusable_runtime_raises_unavailable_with_reason(fake_cudart, env, expect):
    """Each way the explicit library (the fake) can be refused gives
    GpuRuntimeUnavailable with the reason in its text, and leaves the shim unbound."""
    out = fake_cudart.run(
        """
        emit({"e": err(rt.ensure_bound), "bound": shim.is_bound(), "binding": rt.current() is not None})
        """,
        **env,
    )
    assert out["e"]["type"] == "GpuRuntimeUnavailable", out["e"]
    assert expect in out["e"]["text"]
    assert out["bound"] is False and out["binding"] is False


def test_unknown_platform_value_fails_ensure_bound(fake_cudart):
    """ensure_bound() with an unknown MONARCH_CY_GPU_PLATFORM raises ValueError naming
    it, even with an explicit library set, and binds nothing."""
    out = fake_cudart.run(
        """
        emit({"e": err(rt.ensure_bound), "bound": shim.is_bound()})
        """,
        MONARCH_CY_GPU_PLATFORM="metal",
    )
    assert out["e"]["type"] == "ValueError" and "'metal'" in out["e"]["text"]
    assert out["bound"] is False


def test_cuda12_runtime_gets_the_cuda12_table(fake_cudart):
    """A runtime reporting 12.8 binds with the cuda12 table (versioned symbol tried
    first, the plain name used when absent) and reports version 12.8."""
    out = fake_cudart.run(
        """
        b = rt.ensure_bound()
        emit({"table": b.table.name, "text": b.version_text, "sym": b.symbols["GetDeviceProperties"],
              "props": shim.getDeviceProperties(0)["name"]})
        """,
        FAKE_CUDART_VERSION="12080",
    )
    assert out == {"table": "cuda12", "text": "12.8", "sym": "cudaGetDeviceProperties",
                   "props": "Fake CUDA Device 0"}


@pytest.mark.parametrize("version,table,warns", [
    ("12090", "cuda12", None),                 # 12.9: a proven release
    ("13030", "cuda13", None),                 # 13.3: between 13.0 and 13.5, both proven
    ("14000", "cuda13", "CUDA 14.0 (runtime version 14000) is newer than every release "
                        "the cuda13 table is proven against"),
])
def test_unproven_runtime_binds_with_a_warning_naming_the_newest_proven(fake_cudart, version,
                                                                         table, warns):
    """A runtime outside its table's proven span binds with that table and warns once
    (UnprovenRuntimeWarning naming the newest proven release); a proven one is silent."""
    out = fake_cudart.run(
        """
        import warnings
        from monarch_cy.gpu import UnprovenRuntimeWarning
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            b = rt.ensure_bound()
            rt.ensure_bound()
        emit({"table": b.table.name, "gap": b.proof_gap,
              "warnings": [(w.category.__name__, str(w.message)) for w in seen]})
        """,
        FAKE_CUDART_VERSION=version,
    )
    assert out["table"] == table
    if warns is None:
        assert out["gap"] is None and out["warnings"] == []
    else:
        assert out["warnings"] == [["UnprovenRuntimeWarning", out["gap"]]]  # JSON: lists
        assert out["gap"].startswith(warns)
        assert "CUDA 13.5 (proven in CI against nvidia-cuda-runtime 13.5.37)" in out["gap"]


def test_reset_then_rebind_searches_again(fake_cudart):
    """reset() forgets the binding; the next ensure_bound() binds anew and calls work."""
    out = fake_cudart.run(
        """
        b1 = rt.ensure_bound()
        rt.reset()
        mid = [rt.current(), shim.is_bound()]
        b2 = rt.ensure_bound()
        emit({"mid": mid, "same_obj": b1 is b2, "same_path": b1.path == b2.path, "n": shim.getDeviceCount()})
        """
    )
    assert out == {"mid": [None, False], "same_obj": False, "same_path": True, "n": 1}
