"""Choosing a platform table, and what the tables claim about their proofs.

The values themselves are proven elsewhere (tests/test_vendor_headers.py,
tests/test_hip_python_proof.py); here: that ``table_for`` picks by the
runtime's version, that ``proof_gap`` speaks up outside the proven span (and
only there), and that the proof lists are well-formed.
"""

from __future__ import annotations

import pytest

from monarch_cy import _platform_tables as t

TOOLS = {"cuda": {"nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12"},
         "rocm": {"hip-python", "libamdhip64-dev"}}


@pytest.mark.parametrize("platform,version,table,release", [
    ("cuda", 12000, t.CUDA12, (12, 0)),
    ("cuda", 12090, t.CUDA12, (12, 9)),
    ("cuda", 13000, t.CUDA13, (13, 0)),
    ("cuda", 13050, t.CUDA13, (13, 5)),
    ("cuda", 14020, t.CUDA13, (14, 2)),
    ("rocm", 50_230_000, t.HIP5, (5, 2)),
    ("rocm", 60_241_133, t.HIP6, (6, 2)),
    ("rocm", 60_443_484, t.HIP6, (6, 4)),
    ("rocm", 70_051_831, t.HIP7, (7, 0)),
    ("rocm", 70_253_211, t.HIP7, (7, 2)),
    ("rocm", 80_000_000, t.HIP7, (8, 0)),
])
def test_table_for_picks_by_major_release(platform, version, table, release):
    assert t.table_for(platform, version) is table
    assert t.release_of(platform, version) == release


@pytest.mark.parametrize("platform,version,text", [
    ("cuda", 11080, "CUDA runtime version 11080 (11.8) is older than 12.0"),
    ("rocm", 40_500_000, "HIP runtime version 40500000 (4.5) is older than 5.0"),
])
def test_too_old_runtime_is_refused_naming_the_version(platform, version, text):
    with pytest.raises(ValueError, match=r"^" + text.replace("(", r"\(").replace(")", r"\)")):
        t.table_for(platform, version)


def test_unknown_platform_is_refused_naming_it():
    with pytest.raises(ValueError, match="'metal'"):
        t.table_for("metal", 1)


@pytest.mark.parametrize("platform,version", [
    ("cuda", 12000), ("cuda", 12040), ("cuda", 12090), ("cuda", 13000), ("cuda", 13050),
    ("rocm", 50_230_000), ("rocm", 60_241_133), ("rocm", 60_300_000), ("rocm", 60_443_484),
    ("rocm", 70_051_831), ("rocm", 70_100_000), ("rocm", 70_253_211),
])
def test_releases_within_the_proven_span_need_no_warning(platform, version):
    assert t.proof_gap(platform, version) is None


@pytest.mark.parametrize("platform,version,side,nearest", [
    ("cuda", 13060, "newer", "CUDA 13.5 (proven in CI against nvidia-cuda-runtime 13.5.37)"),
    ("cuda", 14000, "newer", "CUDA 13.5"),
    ("rocm", 70_300_000, "newer", "ROCm 7.2 (proven in CI against hip-python 7.2.2.562.43)"),
    ("rocm", 90_000_000, "newer", "ROCm 7.2"),
    ("rocm", 60_000_000, "older", "ROCm 6.2 (proven in CI against hip-python 6.2.0.499.16)"),
    ("rocm", 50_000_000, "older", "ROCm 5.2"),
])
def test_releases_outside_the_span_are_named_with_the_nearest_proven(platform, version, side, nearest):
    gap = t.proof_gap(platform, version)
    major, minor = t.release_of(platform, version)
    table = t.table_for(platform, version)
    assert gap.startswith(f"{table.vendor} {major}.{minor} (runtime version {version}) is {side} "
                          f"than every release the {table.name} table is proven against")
    assert nearest in gap
    assert "NOT proven" in t.proof_statement(platform, version)


def test_proof_statement_names_the_exact_proof_or_the_span():
    assert t.proof_statement("rocm", 70_253_211) == (
        "ROCm 7.2, table hip7, proven against hip-python 7.2.2.562.43 in CI")
    assert t.proof_statement("cuda", 13030) == (
        "CUDA 13.3, table cuda13, between the releases it is proven against in CI "
        "(CUDA 13.0: nvidia-cuda-runtime 13.0.96; 13.5: nvidia-cuda-runtime 13.5.37)")


@pytest.mark.parametrize("table", t.TABLES, ids=lambda x: x.name)
def test_every_table_lists_its_proofs_in_release_order(table):
    assert table.proofs, f"{table.name} claims no proof"
    keys = [p.key() for p in table.proofs]
    assert keys == sorted(set(keys)), "proofs are not in release order, or repeat a release"
    assert {p.tool for p in table.proofs} <= TOOLS[table.platform]
    for p in table.proofs:
        assert t.table_for(table.platform, _encode(table.platform, *p.key())) is table
        if p.tool in ("hip-python", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12"):
            assert p.version.startswith(p.release + "."), p  # the wheel is that release
    assert table.provenance().startswith("proven in CI against ")


def _encode(platform: str, major: int, minor: int) -> int:
    return major * 1000 + minor * 10 if platform == "cuda" else major * 10_000_000 + minor * 100_000
