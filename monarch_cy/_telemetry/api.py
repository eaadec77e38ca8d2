"""Monarch's telemetry API (``get_meter``, ``span``, ``traced``), ``enable_telemetry``,
and reading this process's spans and metrics back.

User code uses the first three anywhere (an endpoint, the controller, a plain
function); they never need telemetry to be on, nor OpenTelemetry to be installed:

* ``get_meter()`` -> the process's OpenTelemetry ``Meter`` named ``"monarch"``
  (Monarch's).  While telemetry is off it is OpenTelemetry's global one (a no-op,
  which starts recording once telemetry starts in this process); without
  ``opentelemetry-api`` a no-op meter of the same shape.
* ``span(name)`` -> a context manager; ``with span("load") as s:`` records a span
  (``s`` is the OpenTelemetry ``Span``) that is a child of the current one (inside
  an endpoint: the runtime's span of that endpoint run), with the actor's mesh,
  rank and id as attributes.
* ``traced`` / ``traced(name=...)`` -> decorator running a function (``def`` or
  ``async def``) inside ``span(name or fn.__name__)``.

``enable_telemetry(config=None, **kwargs)`` turns telemetry on in this process
(the runtime's instruments: :mod:`monarch_cy._telemetry.runtime`) and in every proc
started after it (it sets ``MONARCH_CY_TELEMETRY=1``, and the OTLP endpoint, in
this process's environment, which procs inherit).  Procs already running keep it
off.  Jobs call it from ``JobTrait.enable_telemetry`` (Monarch's place).

``finished_spans()`` and ``metrics()`` read this process's in-memory reader (spans
of an actor's endpoints are in that actor's proc: read them there, e.g. from an
endpoint).
"""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable, TypeVar, overload

from monarch_cy._telemetry import runtime
from monarch_cy._telemetry.config import TelemetryConfig

__all__ = ["get_meter", "span", "traced", "enable_telemetry", "TelemetryConfig",
           "finished_spans", "metrics", "is_enabled"]

F = TypeVar("F", bound=Callable[..., Any])


def is_enabled() -> bool:
    """Whether telemetry is on in this process."""
    return runtime.instruments() is not None


def enable_telemetry(config: TelemetryConfig | None = None, **kwargs) -> None:
    """Turn telemetry on here and in procs started from now on (module docstring).
    ``config``: a :class:`TelemetryConfig`, else one made from ``kwargs``.
    ``ImportError`` when OpenTelemetry's API or SDK is not installed."""
    if config is None:
        config = TelemetryConfig(**kwargs)
    elif kwargs:
        raise TypeError("enable_telemetry takes a TelemetryConfig or its fields, not both")
    elif not isinstance(config, TelemetryConfig):
        raise TypeError(f"config must be a TelemetryConfig, not {config!r}")
    tel = runtime.start(config)
    from monarch_cy._actor.model import traced_calls  # deferred: import time (actor model)
    traced_calls.install(tel)
    os.environ["MONARCH_CY_TELEMETRY"] = "1"
    if tel.installed.endpoint:
        os.environ["MONARCH_CY_TELEMETRY_OTLP_ENDPOINT"] = tel.installed.endpoint


def get_meter():
    """This process's OpenTelemetry meter ``"monarch"`` (module docstring)."""
    tel = runtime.instruments()
    if tel is not None:
        return tel.installed.meter
    try:
        from opentelemetry import metrics as otel_metrics
    except ImportError:
        return _NoMeter()
    return otel_metrics.get_meter("monarch")


def _actor_attributes() -> dict:
    from monarch_cy._actor.base import state  # deferred: import time (the actor model)
    inst = getattr(state.local, "instance", None)
    if inst is None or inst.host is None:
        return {}
    return {runtime.MESH: inst.name, runtime.RANK: inst.rank.rank,
            runtime.ACTOR: str(inst.actor_id)}


def span(name: str):
    """A span named ``name`` as a context manager (module docstring)."""
    if not isinstance(name, str):
        raise TypeError(f"span name must be a str, not {name!r}")
    tel = runtime.instruments()
    if tel is not None:
        tracer = tel.tracer
    else:
        try:
            from opentelemetry import trace as otel_trace
        except ImportError:
            return _NoSpan()
        tracer = otel_trace.get_tracer("monarch")
    return tracer.start_as_current_span(name, attributes=_actor_attributes())


@overload
def traced(fn: F) -> F: ...


@overload
def traced(*, name: str) -> Callable[[F], F]: ...


def traced(fn=None, *, name: str | None = None):
    """Decorator that runs a function (sync or async) inside ``span(name)``; the
    span's name is ``name`` or the function's ``__name__`` (Monarch's)."""

    def decorator(fn):
        span_name = name if name is not None else fn.__name__
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                with span(span_name):
                    return await fn(*args, **kwargs)
            return async_wrapper

        @functools.wraps(fn)
        def sync_wrapper(*args, **kwargs):
            with span(span_name):
                return fn(*args, **kwargs)
        return sync_wrapper

    if fn is not None:
        return decorator(fn)
    return decorator


def finished_spans() -> tuple:
    """The spans this process finished and still keeps (OpenTelemetry
    ``ReadableSpan``s, oldest first); empty while telemetry is off or spans are
    exported over OTLP."""
    tel = runtime.instruments()
    if tel is None or tel.installed.spans is None:
        return ()
    return tel.installed.spans.spans()


def metrics() -> dict:
    """This process's metrics now: ``{name: [data point, ...]}`` (OpenTelemetry
    data points: ``.attributes``; a counter's ``.value``, a histogram's ``.count``,
    ``.sum``...); empty while telemetry is off or metrics are exported over OTLP."""
    tel = runtime.instruments()
    if tel is None or tel.installed.metric_reader is None:
        return {}
    out: dict = {}
    data = tel.installed.metric_reader.get_metrics_data()
    for rm in (data.resource_metrics if data is not None else ()):
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend(m.data.data_points)
    return out


class _NoSpan:
    """``span()`` without OpenTelemetry installed: records nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def set_attribute(self, key, value) -> None:
        pass

    def add_event(self, name, attributes=None, timestamp=None) -> None:
        pass


class _NoInstrument:
    def add(self, amount, attributes=None, context=None) -> None:
        pass

    def record(self, amount, attributes=None, context=None) -> None:
        pass

    set = record


class _NoMeter:
    """``get_meter()`` without OpenTelemetry installed: instruments that record
    nothing (the ``create_*`` methods of OpenTelemetry's ``Meter``)."""

    def _make(self, name, *args, **kwargs):
        return _NoInstrument()

    create_counter = create_up_down_counter = create_histogram = create_gauge = _make
    create_observable_counter = create_observable_gauge = _make
    create_observable_up_down_counter = _make
