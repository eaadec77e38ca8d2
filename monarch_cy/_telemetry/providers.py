"""The OpenTelemetry SDK of this process: where spans and metrics go, and reading them back.

Imported only when telemetry starts (it imports OpenTelemetry).  :func:`install`
makes one ``TracerProvider`` and one ``MeterProvider`` for the process and, where
the program has not installed its own, makes them OpenTelemetry's global ones (so
``opentelemetry.trace.get_tracer``/``metrics.get_meter`` anywhere reach them):

* with an OTLP endpoint (the config's, else ``MONARCH_CY_TELEMETRY_OTLP_ENDPOINT``,
  else ``OTEL_EXPORTER_OTLP_ENDPOINT``), spans go through a batch processor and
  metrics through a periodic reader to that endpoint over OTLP/HTTP
  (``opentelemetry-exporter-otlp-proto-http``).  When that package is absent, a
  ``RuntimeWarning`` says so and the in-memory reader is used instead;
* otherwise the in-memory reader: finished spans kept for ``retention_secs`` (at
  most ``max_spans``), metrics read on demand (:func:`finished_spans`,
  :func:`metrics_data`).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections import deque

from opentelemetry import metrics as otel_metrics, trace as otel_trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (SimpleSpanProcessor, SpanExporter,
                                            SpanExportResult)

from monarch_cy import _config
from monarch_cy._telemetry.config import TelemetryConfig

__all__ = ["Installed", "install", "otlp_endpoint"]

SCOPE = "monarch"          # Monarch's meter name: get_meter() is this scope's meter


class _Recent(SpanExporter):
    """Finished spans, newest last, for ``retention`` seconds (0: for ever) and at
    most ``limit`` of them."""

    def __init__(self, retention: float, limit: int) -> None:
        self._spans: deque = deque(maxlen=limit)
        self._retention_ns = int(retention * 1e9)
        self._lock = threading.Lock()

    def export(self, spans) -> SpanExportResult:
        with self._lock:
            self._spans.extend(spans)
        return SpanExportResult.SUCCESS

    def spans(self) -> tuple:
        with self._lock:
            if self._retention_ns:
                cut = time.time_ns() - self._retention_ns
                while self._spans and (self._spans[0].end_time or 0) < cut:
                    self._spans.popleft()
            return tuple(self._spans)

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()

    def shutdown(self) -> None:
        pass


class Installed:
    """This process's providers and, when kept in memory, their readers."""

    def __init__(self, tracer_provider, meter_provider, spans: _Recent | None,
                 metric_reader, endpoint: str | None) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.spans = spans                  # None when exporting over OTLP
        self.metric_reader = metric_reader  # InMemoryMetricReader, or None
        self.endpoint = endpoint            # the OTLP endpoint in use, or None
        self.tracer = tracer_provider.get_tracer(SCOPE)
        self.meter = meter_provider.get_meter(SCOPE)


def otlp_endpoint(config: TelemetryConfig) -> str | None:
    """The OTLP endpoint ``config`` asks for (see the module docstring), or None."""
    return (config.otlp_endpoint or _config.telemetry_otlp_endpoint()
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or None)


def _otlp_exporters(endpoint: str):
    """``(span exporter, metric exporter)`` for ``endpoint``, or None (warned) when
    the OTLP exporter package is not installed."""
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import \
            OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import \
            OTLPSpanExporter
    except ImportError as e:
        warnings.warn(
            f"telemetry: an OTLP endpoint is configured ({endpoint}) but the OTLP "
            f"exporter is not installed ({e}); pip install "
            "opentelemetry-exporter-otlp-proto-http (or monarch_cy[otlp]). Spans and "
            "metrics stay in this process's in-memory reader",
            RuntimeWarning, stacklevel=4)
        return None
    base = endpoint.rstrip("/")
    return (OTLPSpanExporter(endpoint=f"{base}/v1/traces"),
            OTLPMetricExporter(endpoint=f"{base}/v1/metrics"))


def install(config: TelemetryConfig) -> Installed:
    """Make this process's providers as ``config`` says (module docstring)."""
    attrs = {"service.name": "monarch_cy", "process.pid": os.getpid()}
    rank = _config.rank()
    if rank is not None:
        attrs["monarch.proc_rank"] = rank
    resource = Resource.create(attrs)
    endpoint = otlp_endpoint(config)
    exporters = _otlp_exporters(endpoint) if endpoint else None
    tp = TracerProvider(resource=resource)
    if exporters is not None:
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        tp.add_span_processor(BatchSpanProcessor(exporters[0]))
        mp = MeterProvider(resource=resource,
                           metric_readers=[PeriodicExportingMetricReader(exporters[1])])
        got = Installed(tp, mp, None, None, endpoint)
    else:
        spans = _Recent(config.retention_secs, config.max_spans)
        tp.add_span_processor(SimpleSpanProcessor(spans))
        reader = InMemoryMetricReader()
        mp = MeterProvider(resource=resource, metric_readers=[reader])
        got = Installed(tp, mp, spans, reader, None)
    # Global only where the program has not set its own (OpenTelemetry allows one).
    if isinstance(otel_trace.get_tracer_provider(), otel_trace.ProxyTracerProvider):
        otel_trace.set_tracer_provider(tp)
    if type(otel_metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider":
        otel_metrics.set_meter_provider(mp)
    return got
