"""Comparisons collected during a benchmark run, printed by conftest at the end."""

from __future__ import annotations

RATIOS: list[dict] = []


def record(name: str, ours: float, anchor_name: str, anchor: float, unit: str, target: str) -> None:
    """Remember one comparison; units ending in '/s' are higher-is-better, others lower."""
    better_high = unit.endswith("/s")
    ratio = ours / anchor if better_high else anchor / ours
    RATIOS.append(
        {"workload": name, "ours": ours, "anchor": anchor_name, "anchor_value": anchor,
         "unit": unit, "ratio": ratio, "target": target}
    )
