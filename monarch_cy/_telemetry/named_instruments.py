"""Monarch's ``Counter``, ``UpDownCounter`` and ``Histogram`` classes
(``monarch._src.actor.telemetry``): an instrument made from its name alone.

``Counter("requests")`` holds, as ``inner``, the instrument of that name made by this
process's meter (:func:`monarch_cy._telemetry.api.get_meter`, made when the object
is: an object made before telemetry was enabled records into OpenTelemetry's global
meter, as any instrument would).  ``add(amount, attributes=None, context=None)``
(``record`` for a histogram) passes ``int(amount)`` (a histogram: ``amount``
unchanged) and the attributes with every key and value turned into a string --
Monarch's rule, so a metric carries the same attribute values on both systems;
empty or no attributes pass ``None``.  ``context`` is accepted and not used, as in
Monarch.
"""

from __future__ import annotations

__all__ = ["Counter", "UpDownCounter", "Histogram"]


def _text_attributes(attributes) -> dict | None:
    if not attributes:
        return None
    return {str(k): str(v) for k, v in attributes.items()}


class _Named:
    _create = ""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{type(self).__name__}(name): name must be a non-empty "
                             f"string, got {name!r}")
        from monarch_cy._telemetry.api import get_meter  # deferred: import time (OTel)
        self.name = name
        self.inner = getattr(get_meter(), self._create)(name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Counter(_Named):
    """A monotonic counter named ``name`` (module docstring)."""

    _create = "create_counter"

    def add(self, amount, attributes=None, context=None) -> None:
        self.inner.add(int(amount), attributes=_text_attributes(attributes))


class UpDownCounter(_Named):
    """A counter that may go down (module docstring)."""

    _create = "create_up_down_counter"

    def add(self, amount, attributes=None, context=None) -> None:
        self.inner.add(int(amount), attributes=_text_attributes(attributes))


class Histogram(_Named):
    """A histogram named ``name`` (module docstring)."""

    _create = "create_histogram"

    def record(self, amount, attributes=None, context=None) -> None:
        self.inner.record(amount, attributes=_text_attributes(attributes))
