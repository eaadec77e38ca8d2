"""Argument checks shared by the package: one rule per kind of argument, one wording.

Every message names the parameter and quotes the value it got::

    offset must be an int, got float 1.5
    nbytes must be >= 0, got -1
    length must be in 1..2147483648, got 0
    timeout must be a positive number of seconds, got 0
    heartbeat_timeout must be a number of seconds >= 0 or None, got 'x'

The rules:

* An **int** is an ``int`` or anything else with ``__index__`` (numpy integers),
  never a ``bool``: ``True`` is a flag, not a count, a rank or a size.
  :func:`check_int` raises ``TypeError`` for the wrong type and ``ValueError`` for
  a value out of range.  :func:`is_int` is the strict predicate (``int`` itself,
  not ``bool``) for the places that keep the value as given and word their own
  message.
* A **flag** is ``True`` or ``False`` itself (``None`` too with ``allow_none``):
  :func:`check_bool` raises ``TypeError`` for anything else, so ``'no'``, ``0`` or
  ``"False"`` are never taken for a truth value.
* A **number** is an ``int`` or a ``float`` (not ``bool``) other than NaN.  A
  **number of seconds** is a number ``> 0`` (``>= 0`` with ``allow_zero``;
  ``None`` passes only with ``allow_none``).  :func:`check_number` and
  :func:`check_timeout` raise ``ValueError`` for anything else, the wrong type
  included: callers of the timeouts checked here have always caught
  ``ValueError``.

Nothing heavy is imported here (``operator`` only): this module sits on start-up
paths.  Environment
variables are parsed by :mod:`monarch_cy._config`, which words its messages the
same way, variable first (``MONARCH_CY_HOST_TIMEOUT='abc' must be ...``).
"""

from __future__ import annotations

import operator

__all__ = ["is_int", "check_int", "check_bool", "is_number", "check_number", "check_timeout", "describe"]


def describe(value: object) -> str:
    """``value`` for a message: its type's name, then its repr (``float 1.5``)."""
    return f"{type(value).__name__} {value!r}"


def is_int(value: object) -> bool:
    """Whether ``value`` is an ``int`` and not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name: str, value: object, *, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """``value`` as a plain ``int``, within ``minimum..maximum`` (each optional).

    ``TypeError`` unless it is an int (``__index__``, not ``bool``): ``"{name} must
    be an int, got float 1.5"``; ``ValueError`` out of range: ``"{name} must be >=
    0, got -1"``, ``"... must be <= 9, got 10"``, ``"... must be in 1..64, got 0"``
    when both bounds are given.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {describe(value)}")
    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an int, got {describe(value)}") from None
    low = minimum is not None and v < minimum
    high = maximum is not None and v > maximum
    if low or high:
        if minimum is not None and maximum is not None:
            raise ValueError(f"{name} must be in {minimum}..{maximum}, got {v}")
        if low:
            raise ValueError(f"{name} must be >= {minimum}, got {v}")
        raise ValueError(f"{name} must be <= {maximum}, got {v}")
    return v


def check_bool(name: str, value: object, *, allow_none: bool = False) -> bool | None:
    """``value`` when it is ``True`` or ``False`` (or ``None`` with ``allow_none``);
    ``TypeError`` otherwise: ``"{name} must be True or False, got str 'no'"``."""
    if value is True or value is False or (value is None and allow_none):
        return value  # type: ignore[return-value]
    raise TypeError(f"{name} must be True or False{' or None' if allow_none else ''}, "
                    f"got {describe(value)}")


def is_number(value: object) -> bool:
    """Whether ``value`` is an ``int`` or ``float``, not a ``bool``, not NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value == value  # NaN is the one float unequal to itself


def check_number(name: str, value: object, *, minimum: float) -> float:
    """``value`` (a number, see :func:`is_number`) ``>= minimum``, as a float;
    ``ValueError`` otherwise: ``"{name} must be a number >= 1, got 0.5"``."""
    if not is_number(value) or value < minimum:  # type: ignore[operator]
        raise ValueError(f"{name} must be a number >= {minimum:g}, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def check_timeout(name: str, value: object, *, allow_zero: bool = False,
                  allow_none: bool = False) -> float | None:
    """``value`` as a number of seconds (a float), or ``None`` with ``allow_none``.

    A number ``> 0`` (``>= 0`` with ``allow_zero``; infinity passes, NaN does not);
    ``ValueError`` otherwise, naming ``name`` and the value:
    ``"timeout must be a positive number of seconds, got 0"``.
    """
    if value is None and allow_none:
        return None
    if is_number(value) and (value > 0 or (allow_zero and value == 0)):  # type: ignore[operator]
        return float(value)  # type: ignore[arg-type]
    what = "a number of seconds >= 0" if allow_zero else "a positive number of seconds"
    raise ValueError(f"{name} must be {what}{' or None' if allow_none else ''}, "
                     f"got {value!r}")
