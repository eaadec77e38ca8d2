"""pytest helpers of ``monarch.config``: ``parametrize_config`` and
``parametrize_config_pointwise`` run a test once per combination of configuration
values, each inside :func:`monarch_cy._config_api.configured` (so the values are set
for the test's body and restored after it).

Imports pytest only when a helper is used.
"""

from __future__ import annotations

from typing import Any, Callable

from monarch_cy._config_api import configured

__all__ = ["parametrize_config", "parametrize_config_pointwise"]


def _wrap(fn: Callable, sig) -> Callable:
    import functools
    import inspect

    if inspect.iscoroutinefunction(fn):
        async def wrapper(_config_overrides, *args, **kwargs):
            with configured(**_config_overrides):
                return await fn(*args, **kwargs)
    else:
        def wrapper(_config_overrides, *args, **kwargs):
            with configured(**_config_overrides):
                return fn(*args, **kwargs)
    functools.update_wrapper(wrapper, fn)
    wrapper.__signature__ = sig   # type: ignore[attr-defined]
    return wrapper


def _parametrize(combos: list, keys: list) -> Callable:
    import inspect

    import pytest  # deferred: only these pytest helpers need it

    ids = ["-".join(f"{k}={v}" for k, v in zip(keys, c)) for c in combos]
    dicts = [dict(zip(keys, c)) for c in combos]

    def decorator(fn):
        sig = inspect.signature(fn)
        sig = sig.replace(parameters=[inspect.Parameter(
            "_config_overrides", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *sig.parameters.values()])
        return pytest.mark.parametrize("_config_overrides", dicts, ids=ids)(
            _wrap(fn, sig))
    return decorator


def parametrize_config(**config_options: Any) -> Callable:
    """pytest helper: run the test under every combination of the given values, each
    inside :func:`configured`."""
    import itertools
    if not config_options:
        raise ValueError("parametrize_config requires at least one config option")
    keys = list(config_options)
    return _parametrize(list(itertools.product(*(list(config_options[k]) for k in keys))),
                        keys)


def parametrize_config_pointwise(**config_options: Any) -> Callable:
    """pytest helper: like :func:`parametrize_config`, the value lists taken in
    lockstep (all of one length)."""
    if not config_options:
        raise ValueError("parametrize_config_pointwise requires at least one config "
                         "option")
    keys = list(config_options)
    lists = [list(config_options[k]) for k in keys]
    if len({len(v) for v in lists}) != 1:
        raise ValueError("parametrize_config_pointwise requires every option to have the "
                         "same number of values; got lengths "
                         f"{dict(zip(keys, map(len, lists)))}")
    return _parametrize(list(zip(*lists)), keys)
