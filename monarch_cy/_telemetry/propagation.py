"""Trace context across a call: the caller's CLIENT span is the parent of the
endpoint's SERVER span in the actor, so one call is one trace.

The caller's instrumented adverbs (:mod:`monarch_cy._actor.model.traced_calls`) add
one keyword argument, :data:`TRACE_KW`, to the call: a carrier dict holding the W3C
``traceparent`` (and ``tracestate``) of the CLIENT span, written by OpenTelemetry's
configured propagator.  The actor's host takes it out of the call's keyword
arguments before anything else sees them (an endpoint never receives it, whether
its proc records telemetry or not) and keeps it with the message being handled;
the instrumented endpoint (:mod:`monarch_cy._actor.host.traced_endpoints`) starts
its SERVER span under it.  A caller with telemetry off adds nothing, so the call
path of a process without telemetry is unchanged.
"""

from __future__ import annotations

__all__ = ["TRACE_KW", "carrier_of", "parent_of"]

#: The keyword argument that carries the caller's trace context (never seen by user
#: code: the host removes it).
TRACE_KW = "__monarch_cy_trace__"


def carrier_of(span) -> dict:
    """The trace context of ``span`` as a small dict of strings."""
    from opentelemetry import propagate, trace  # deferred: OpenTelemetry (telemetry on)
    carrier: dict = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def parent_of(carrier):
    """The OpenTelemetry ``Context`` a caller's ``carrier`` describes (None: none)."""
    if not carrier:
        return None
    from opentelemetry import propagate  # deferred: as above
    return propagate.extract(carrier)
