"""monarch_cy.telemetry: OpenTelemetry spans and metrics (Monarch's names, and ours).

Re-exports only; the implementation lives in :mod:`monarch_cy._telemetry`.  See
``docs/observability.md`` ("Telemetry").  ``get_meter``, ``span`` and ``traced`` are
also in :mod:`monarch_cy.actor` (as in ``monarch.actor``), ``TelemetryConfig`` in
:mod:`monarch_cy.job` (``JobTrait.enable_telemetry``).
"""

from monarch_cy._telemetry.api import (enable_telemetry, finished_spans, get_meter,
                                       is_enabled, metrics, span, traced)
from monarch_cy._telemetry.config import TelemetryConfig

__all__ = ["TelemetryConfig", "enable_telemetry", "finished_spans", "get_meter",
           "is_enabled", "metrics", "span", "traced"]
