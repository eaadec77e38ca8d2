"""Monarch's ``rdma_ibverbs_target`` (``MONARCH_CY_RDMA_IBVERBS_TARGET``): which verbs
device this process's RDMA uses.

The forms are Monarch's: ``nic:<name>`` (that device), ``cpu:<numa node>`` and
``gpu:<ordinal>`` (the device nearest that memory: here the choice stays automatic,
as monarch_cy does not rank devices by PCIe distance), and empty (automatic).  Any
other value is an error, raised as :class:`RdmaInitError` by the calls that would
set RDMA up (``RDMABuffer(...)``, ``RDMAAction.submit()``), naming the setting and
the value -- also when this process would not use verbs at all, as in Monarch,
where a malformed pin must not turn silently into the TCP fallback.

Read at each call, so a ``monarch.config.configure`` in this process (or the
configuration a proc started with) applies at once.
"""

from __future__ import annotations

from monarch_cy import _config
from monarch_cy._errors import RdmaInitError

__all__ = ["check", "nic"]

_FORMS = "`cpu:<numa>`, `gpu:<ordinal>` or `nic:<name>`"


def _parse(spec: str) -> tuple:
    """``(kind, value)`` of a non-empty target; ``ValueError`` with the reason."""
    kind, sep, value = spec.partition(":")
    if not sep:
        raise ValueError(f"a target must be {_FORMS}")
    if kind in ("cpu", "gpu"):
        if not value.isdigit() or int(value) >= 2 ** 32:
            what = "NUMA node" if kind == "cpu" else "GPU ordinal"
            raise ValueError(f"the {kind} target's {what} {value!r} must be an integer "
                             f"in 0..{2 ** 32 - 1}")
        return kind, int(value)
    if kind == "nic":
        if not value:
            raise ValueError("a nic target must name a device, e.g. `nic:mlx5_0`")
        return kind, value
    raise ValueError(f"unknown target kind {kind!r}; use {_FORMS}")


def _target() -> tuple | None:
    spec = (_config.rdma_ibverbs_target() or "").strip()
    if not spec:
        return None
    try:
        return _parse(spec)
    except ValueError as e:
        raise RdmaInitError(
            f"invalid RDMA_IBVERBS_TARGET (`rdma_ibverbs_target` in monarch.config, "
            f"MONARCH_CY_RDMA_IBVERBS_TARGET here) value {spec!r}: {e}") from None


def check() -> None:
    """Raise :class:`RdmaInitError` when the target is malformed."""
    _target()


def nic() -> str | None:
    """The device a ``nic:<name>`` target names, else None (automatic)."""
    t = _target()
    return t[1] if t is not None and t[0] == "nic" else None
