"""``TelemetryConfig``: what ``enable_telemetry`` is given (Monarch's fields, plus ours)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["TelemetryConfig"]


@dataclass
class TelemetryConfig:
    """Configuration of telemetry, for ``JobTrait.enable_telemetry`` (Monarch's) or
    ``monarch_cy.telemetry.enable_telemetry``.

    Monarch's fields, in Monarch's order (positional arguments mean the same):

    * ``retention_secs``: how long the in-memory reader keeps a finished span
      (seconds; ``0``: for ever).  Monarch's bounds its query store's history.
    * ``include_dashboard``, ``dashboard_port``: Monarch's web dashboard.  There is
      none here: ``True`` raises ``NotImplementedError`` when telemetry starts.
    * ``snapshot_interval_secs``: Monarch's periodic mesh-topology snapshots;
      accepted and unused.

    Ours (keyword only):

    * ``otlp_endpoint``: export spans and metrics to this OTLP/HTTP endpoint
      (``http://collector:4318``); None: ``MONARCH_CY_TELEMETRY_OTLP_ENDPOINT``, else
      ``OTEL_EXPORTER_OTLP_ENDPOINT``, else none (the in-memory reader).
    * ``max_spans``: the in-memory reader keeps at most this many finished spans
      per process (the oldest go first).
    """

    retention_secs: int = 3600
    include_dashboard: bool = False
    dashboard_port: int = 8265
    snapshot_interval_secs: float = 30.0
    otlp_endpoint: str | None = field(default=None, kw_only=True)
    max_spans: int = field(default=100_000, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.retention_secs, (int, float)) or self.retention_secs < 0:
            raise ValueError(f"retention_secs must be a number of seconds >= 0, not "
                             f"{self.retention_secs!r}")
        if not isinstance(self.max_spans, int) or self.max_spans < 1:
            raise ValueError(f"max_spans must be an int >= 1, not {self.max_spans!r}")
        if self.otlp_endpoint is not None and not isinstance(self.otlp_endpoint, str):
            raise TypeError(f"otlp_endpoint must be a URL (str) or None, not "
                            f"{self.otlp_endpoint!r}")
