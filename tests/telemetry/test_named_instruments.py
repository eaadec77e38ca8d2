"""Monarch's named instruments (``Counter``, ``UpDownCounter``, ``Histogram`` of
``monarch._src.actor.telemetry``): made from a name by this process's meter, they pass
amounts and string attributes to it."""

from __future__ import annotations

import pytest

from monarch_cy._telemetry.named_instruments import Counter, Histogram, UpDownCounter


class _Inner:
    def __init__(self):
        self.calls = []

    def add(self, amount, attributes=None):
        self.calls.append(("add", amount, attributes))

    def record(self, amount, attributes=None):
        self.calls.append(("record", amount, attributes))


@pytest.mark.parametrize("cls", [Counter, UpDownCounter])
def test_add_passes_an_int_and_string_attributes(cls):
    c = cls("requests")
    c.inner = _Inner()
    c.add(2.9, attributes={"method": "ping", 7: 1.5})
    c.add(1, attributes={})
    c.add(3)
    assert c.inner.calls == [("add", 2, {"method": "ping", "7": "1.5"}),
                             ("add", 1, None), ("add", 3, None)]


def test_histogram_records_the_amount_unchanged():
    h = Histogram("latency")
    h.inner = _Inner()
    h.record(0.25, attributes={"rank": 3})
    assert h.inner.calls == [("record", 0.25, {"rank": "3"})]


def test_each_is_made_by_this_processs_meter():
    # Without telemetry enabled the meter is OpenTelemetry's global one (or a no-op):
    # the instruments take calls and record nothing, and never raise.
    for obj in (Counter("a"), UpDownCounter("b")):
        assert hasattr(obj.inner, "add")
        obj.add(1, attributes={"k": "v"})
    Histogram("c").record(1.0)


@pytest.mark.parametrize("name", ["", None, 3])
def test_a_bad_name_is_refused_naming_it(name):
    with pytest.raises(ValueError, match=r"Counter\(name\): name must be a non-empty string"):
        Counter(name)
