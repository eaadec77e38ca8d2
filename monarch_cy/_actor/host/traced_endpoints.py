"""An actor's endpoints, instrumented: a span and metrics for each endpoint it runs.

:func:`instrument` is called once per actor, at its start, when telemetry is on in
its proc (:func:`monarch_cy._telemetry.runtime.instruments`); an actor started
with telemetry off runs its endpoints unwrapped.  It wraps each endpoint function
so that each run is a SERVER span ``<mesh>.<endpoint>`` (current while it runs:
a user's ``span``/``traced`` inside nests under it; its parent is the caller's
CLIENT span when the call carried one) and counts the run, its
duration and, when it raises, a failure; and it wraps the actor's message handler
to count the bytes of each call message received.  Attributes: mesh, endpoint, rank
(the actor's rank in its mesh), and the actor's id on spans.  Built-in messages
(``__ready__``, ``__stop__``...) and plain methods called through ``as_endpoint``
are not counted.
"""

from __future__ import annotations

import functools
from time import perf_counter

from monarch_cy._actor.model.actor import _message
from monarch_cy._telemetry.propagation import parent_of
from monarch_cy._telemetry.runtime import ACTOR, ENDPOINT, MESH, RANK
from monarch_cy._transport.protocol import unpack_call

__all__ = ["instrument"]


def instrument(host, tel):
    """Wrap the endpoints in ``host.endpoints`` (an ``ActorHost``'s table) with
    ``tel`` (an ``Instruments``); return ``host``'s message handler wrapped to count
    bytes (the caller installs it)."""
    from opentelemetry.trace import SpanKind  # deferred: import time (OpenTelemetry)
    base = {MESH: host.name, RANK: host.rank.rank}
    actor_id = str(host.inst.actor_id)
    for name, (fn, explicit, asy, concurrent) in list(host.endpoints.items()):
        attrs = {**base, ENDPOINT: name}
        host.endpoints[name] = (_wrap(fn, asy, attrs, {**attrs, ACTOR: actor_id}, tel,
                                      SpanKind.SERVER), explicit, asy, concurrent)
    return _counting(host._handle, host.endpoints, base, tel.endpoint_bytes)


def _wrap(fn, asy, attrs, span_attrs, tel, kind):
    tracer, count, latency = tel.tracer, tel.endpoint_count, tel.endpoint_latency
    failures = tel.endpoint_failures
    name = f"{attrs[MESH]}.{attrs[ENDPOINT]}"

    if asy:
        @functools.wraps(fn)
        async def traced_async(actor, *args, **kwargs):
            with tracer.start_as_current_span(name, context=_caller(), kind=kind,
                                              attributes=span_attrs):
                t0 = perf_counter()
                try:
                    return await fn(actor, *args, **kwargs)
                except BaseException:
                    failures.add(1, attrs)
                    raise
                finally:
                    latency.record(perf_counter() - t0, attrs)
                    count.add(1, attrs)
        return traced_async

    @functools.wraps(fn)
    def traced(actor, *args, **kwargs):
        with tracer.start_as_current_span(name, context=_caller(), kind=kind,
                                          attributes=span_attrs):
            t0 = perf_counter()
            try:
                return fn(actor, *args, **kwargs)
            except BaseException:
                failures.add(1, attrs)
                raise
            finally:
                latency.record(perf_counter() - t0, attrs)
                count.add(1, attrs)
    return traced


def _caller():
    """The calling span's context, if the call carried one (the host keeps it with
    the message being handled); None: the span's parent is the current span."""
    msg = _message.get()
    return parent_of(msg[2]) if msg is not None and len(msg) > 2 else None


def _counting(handle, endpoints, base, counter):
    by_name: dict = {}

    def counted(frames, loop=None):
        try:
            method = unpack_call(frames[0])[0][0]
        except Exception:  # noqa: BLE001 - malformed: the handler reports it
            return handle(frames, loop)
        if method in endpoints:
            attrs = by_name.get(method)
            if attrs is None:
                attrs = by_name[method] = {**base, ENDPOINT: method}
            counter.add(sum(memoryview(f).nbytes for f in frames), attrs)
        return handle(frames, loop)
    return counted
