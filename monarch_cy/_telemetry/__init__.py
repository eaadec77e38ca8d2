"""Telemetry: OpenTelemetry spans and metrics of the runtime and of user code.

Modules, bottom up: :mod:`.config` (``TelemetryConfig``), :mod:`.providers` (the
OpenTelemetry SDK set up in this process: OTLP export or the in-memory reader),
:mod:`.runtime` (the one switch, and the runtime's instruments), :mod:`.propagation`
(a call's trace context, caller to actor), :mod:`.api`
(Monarch's ``get_meter``/``span``/``traced``, ``enable_telemetry``, reading back).

Everything below :mod:`.api` imports only the standard library and
:mod:`monarch_cy._config` at import time (OpenTelemetry is imported when telemetry
starts), so the actor model may import :mod:`.runtime`; :mod:`.api` sits above the
actor model (it names the current actor and installs the caller's instruments).
The instruments themselves live with what they measure:
:mod:`monarch_cy._actor.model.traced_calls` (a caller's adverbs) and
:mod:`monarch_cy._actor.host.traced_endpoints` (an actor's endpoints).
"""
