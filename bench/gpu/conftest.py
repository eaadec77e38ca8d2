"""GPU benchmarks: skip without a GPU; print the ratios against the anchors at the end."""

from __future__ import annotations

import json
import os

import pytest

from _ratios import RATIOS


@pytest.fixture(scope="session", autouse=True)
def _need_gpu():
    try:
        from monarch_cy.gpu import device_count

        if device_count() < 1:
            pytest.skip("no GPU")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no GPU: {str(e).splitlines()[0]}")


def pytest_terminal_summary(terminalreporter):
    if not RATIOS:
        return
    tr = terminalreporter
    tr.section("monarch_cy vs anchors (ratio > 1 means monarch_cy is better)")
    for r in RATIOS:
        tr.write_line(
            f"{r['workload']:<44} ours {r['ours']:>10.3f} {r['unit']:<6} "
            f"{r['anchor']:<22} {r['anchor_value']:>10.3f}  ratio {r['ratio']:.3f}  (target {r['target']})"
        )
    out = os.environ.get("MONARCH_CY_BENCH_JSON")
    if out:
        with open(out, "w") as f:
            json.dump(RATIOS, f, indent=2)
