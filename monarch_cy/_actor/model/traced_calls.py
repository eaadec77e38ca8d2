"""A caller's calls, instrumented: spans and metrics of each endpoint call it makes.

:func:`install` replaces the adverbs of :class:`~.endpoint.Endpoint` (``call``,
``call_one``, ``choose``, ``broadcast``, ``stream``, ``Accumulator.accumulate``'s
and ``send``'s entries) with wrappers that, around the original, count the call,
open a CLIENT span ``<mesh>.<endpoint>`` (whose context travels with the call:
:mod:`monarch_cy._telemetry.propagation`) and, once the call's Future resolves,
record its latency and whether it failed (:mod:`monarch_cy._telemetry.runtime` names
the instruments).  It runs once per process, when telemetry starts; until then the
adverbs are the plain ones, so a process with telemetry off runs none of this.
"""

from __future__ import annotations

import functools
from time import perf_counter

from monarch_cy._telemetry.propagation import TRACE_KW, carrier_of
from monarch_cy._telemetry.runtime import ADVERB, ENDPOINT, MESH, RANK
from monarch_cy._actor.model.endpoint import Endpoint

__all__ = ["install"]

_ADVERBS = ("call", "call_one", "choose", "broadcast", "stream", "_accumulate",
            "_send_to")
# The adverbs that take the call's keyword arguments as a dict, and where: the trace
# context (propagation.TRACE_KW) goes into that dict, else into their own **kwargs.
_KWARGS_AT = {"_send_to": 1, "_accumulate": 3}
_INSTALLED: list = []        # the Instruments installed with (once per process)


def install(tel) -> None:
    """Instrument every adverb with ``tel`` (an ``Instruments``); idempotent."""
    if _INSTALLED:
        return
    _INSTALLED.append(tel)
    from opentelemetry.trace import SpanKind, StatusCode  # deferred: import time (OpenTelemetry)
    for adverb in _ADVERBS:
        setattr(Endpoint, adverb, _wrap(adverb, getattr(Endpoint, adverb), tel,
                                        SpanKind.CLIENT, StatusCode.ERROR))


def _wrap(adverb, orig, tel, client, error):
    tracer, count, latency = tel.tracer, tel.call_count, tel.call_latency
    failures = tel.call_failures
    public = {"_accumulate": "accumulate", "_send_to": "send"}.get(adverb, adverb)
    kw_at = _KWARGS_AT.get(adverb)

    @functools.wraps(orig)
    def traced(self, *args, **kwargs):
        mesh = self._mesh
        attrs = {MESH: mesh._name, ENDPOINT: self._name}
        granks = mesh._granks()
        if len(granks) == 1:
            attrs[RANK] = granks[0]
        span = tracer.start_span(f"{mesh._name}.{self._name}", kind=client,
                                 attributes={**attrs, ADVERB: public,
                                             "monarch.actors": len(granks)})
        t0 = perf_counter()
        try:
            carrier = carrier_of(span)           # the endpoint's span is its child
            if kw_at is None:
                kwargs = {**kwargs, TRACE_KW: carrier}
            else:
                args = (*args[:kw_at], {**args[kw_at], TRACE_KW: carrier}, *args[kw_at + 1:])
            out = orig(self, *args, **kwargs)
        except BaseException as e:
            count.add(1, attrs)
            failures.add(1, attrs)
            span.record_exception(e)
            span.set_status(error, type(e).__name__)
            span.end()
            raise
        if adverb == "choose":             # the actor chosen is known now
            attrs[RANK] = granks[mesh._rr]
            span.set_attribute(RANK, attrs[RANK])
        count.add(1, attrs)
        futs = [] if out is None else [out] if adverb != "stream" else list(out)
        if not futs:                       # broadcast, send: nothing comes back
            span.end()
            return out
        left = [len(futs)]
        bad = []

        def done(f):
            if f._exc is not None:
                bad.append(f._exc)
            left[0] -= 1
            if left[0]:
                return
            latency.record(perf_counter() - t0, attrs)
            if bad:
                failures.add(1, attrs)
                span.set_status(error, type(bad[0]).__name__)
                span.set_attribute("monarch.error", _one_line(bad[0]))
            span.end()
        for f in futs:
            f._add_callback(done)
        return iter(futs) if adverb == "stream" else out
    return traced


def _one_line(exc) -> str:
    try:
        text = str(exc).splitlines()[0] if str(exc) else ""
    except Exception:  # noqa: BLE001 - a broken __str__
        text = "<str() failed>"
    return f"{type(exc).__name__}: {text}"[:500]
