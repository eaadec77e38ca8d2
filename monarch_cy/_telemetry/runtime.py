"""The one switch of telemetry in a process, and the runtime's instruments.

Telemetry is off until :func:`start` (``enable_telemetry()``, or
``MONARCH_CY_TELEMETRY=1`` seen by :func:`start_if_wanted` when the process's actor
runtime starts).  While it is off nothing is instrumented: the runtime's code
paths are the uninstrumented ones, and OpenTelemetry is not imported.  Once on,
it stays on for the life of the process.  Whoever instruments something asks
:func:`instruments` once, where it is set up (an actor's spawn, a process's
start), never per call.

The instruments (:class:`Instruments`), with the attributes each carries:

============================== ========= ==================================================
``monarch.call.count``         counter   calls made by this process (adverb; a mesh-wide
                                         call counts once); mesh, endpoint, rank (one actor)
``monarch.call.latency``       histogram seconds from the call to its Future resolving
``monarch.call.failures``      counter   calls whose Future failed (or that raised)
``monarch.endpoint.count``     counter   endpoint runs in this actor; mesh, endpoint, rank
``monarch.endpoint.latency``   histogram seconds an endpoint ran
``monarch.endpoint.failures``  counter   endpoint runs that raised
``monarch.endpoint.bytes``     counter   bytes of the call messages an actor received
                                         (header, pickled arguments, buffers)
``monarch.proc.respawns``      counter   procs respawned (controller); mesh, rank
============================== ========= ==================================================

Spans: ``<mesh>.<endpoint>`` of kind CLIENT for each call (from the call to its
Future resolving; an error status when it failed) and of kind SERVER for each
endpoint run in the actor (current while the endpoint runs, so a user's ``span``
inside it is its child); ``respawn <mesh>`` for each respawned rank.
"""

from __future__ import annotations

import threading

from monarch_cy import _config
from monarch_cy._telemetry.config import TelemetryConfig

__all__ = ["Instruments", "instruments", "start", "start_if_wanted", "MESH", "ENDPOINT",
           "RANK", "ADVERB", "ACTOR"]

MESH, ENDPOINT, RANK, ADVERB, ACTOR = ("monarch.mesh", "monarch.endpoint", "monarch.rank",
                                       "monarch.adverb", "monarch.actor")

_INSTR = None              # Instruments while telemetry is on in this process
_CHECKED = False           # start_if_wanted ran
_LOCK = threading.Lock()


class Instruments:
    """The runtime's tracer and meters (module docstring), made once per process."""

    def __init__(self, installed) -> None:
        self.installed = installed
        self.tracer = installed.tracer
        m = installed.meter
        self.call_count = m.create_counter(
            "monarch.call.count", "{call}", "calls made, by endpoint")
        self.call_latency = m.create_histogram(
            "monarch.call.latency", "s", "from a call to its result")
        self.call_failures = m.create_counter(
            "monarch.call.failures", "{call}", "calls that failed")
        self.endpoint_count = m.create_counter(
            "monarch.endpoint.count", "{call}", "endpoint runs in an actor")
        self.endpoint_latency = m.create_histogram(
            "monarch.endpoint.latency", "s", "how long an endpoint ran")
        self.endpoint_failures = m.create_counter(
            "monarch.endpoint.failures", "{call}", "endpoint runs that raised")
        self.endpoint_bytes = m.create_counter(
            "monarch.endpoint.bytes", "By", "bytes of call messages actors received")
        self.respawns = m.create_counter(
            "monarch.proc.respawns", "{proc}", "procs respawned")

    def respawned(self, mesh: str, ranks, started_ns: int) -> None:
        """``ranks`` of proc mesh ``mesh`` were respawned, the respawn having started
        at ``started_ns`` (``time.time_ns()``): one count and one span per rank."""
        for g in ranks:
            attrs = {MESH: mesh, RANK: g}
            self.respawns.add(1, attrs)
            self.tracer.start_span(f"respawn {mesh}", attributes=attrs,
                                   start_time=started_ns).end()


def instruments() -> Instruments | None:
    """The runtime's instruments while telemetry is on in this process, else None."""
    return _INSTR


def start(config: TelemetryConfig | None = None) -> Instruments:
    """Turn telemetry on in this process (idempotent: a second call keeps the first
    configuration).  ``ImportError`` naming the packages when OpenTelemetry's API or
    SDK is not installed; ``NotImplementedError`` for ``include_dashboard=True``."""
    global _INSTR
    with _LOCK:
        if _INSTR is not None:
            return _INSTR
        config = TelemetryConfig() if config is None else config
        if config.include_dashboard:
            raise NotImplementedError("TelemetryConfig(include_dashboard=True): monarch_cy "
                                      "has no telemetry dashboard; export to an OTLP "
                                      "collector (otlp_endpoint=) and view it there")
        try:
            from monarch_cy._telemetry import providers  # imports OpenTelemetry
        except ImportError as e:
            raise ImportError(f"telemetry needs opentelemetry-api and opentelemetry-sdk "
                              f"(pip install 'monarch_cy[telemetry]'): {e}") from e
        _INSTR = Instruments(providers.install(config))
        return _INSTR


def start_if_wanted() -> Instruments | None:
    """Where a process's actor runtime starts: start telemetry when
    ``MONARCH_CY_TELEMETRY=1`` (read this once per process).  A missing
    OpenTelemetry is then reported on stderr and telemetry stays off."""
    global _CHECKED
    if _CHECKED or _INSTR is not None:
        return _INSTR
    _CHECKED = True
    if not _config.telemetry():
        return None
    try:
        return start(TelemetryConfig())
    except ImportError as e:
        from monarch_cy._log import logger  # deferred: import time (logging)
        logger("telemetry").error("MONARCH_CY_TELEMETRY=1 but telemetry cannot start: %s", e)
        return None
