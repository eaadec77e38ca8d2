"""``monarch`` under :mod:`monarch_cy.compat`: the top of Monarch's package tree.

Provides Monarch's public submodules ``monarch.actor``, ``monarch.rdma``,
``monarch.job``, ``monarch.spmd`` and ``monarch.config`` (monarch_cy's own modules,
imported on first use, also as attributes: ``import monarch; monarch.actor``), and
of Monarch's top-level names those that are the actor API's own objects
(``Extent``, ``Future``), the mesh algebra's ``Shape``, ``NDSlice`` and
``Selection``, and the configuration functions (``configure``,
``configured``, ``get_global_config``, ``get_runtime_config``,
``clear_runtime_config``).  The tensor engine (``monarch.remote``, ``monarch.Tensor``,
``monarch.fetch_shard``...) and every private module are not provided.
"""

from __future__ import annotations

import importlib

# A package (so that ``monarch.actor`` can be imported), with no directory of its
# own: the compat finder resolves every submodule.
__path__: list = []

_SUBMODULES = ("actor", "rdma", "job", "spmd", "config")
_FROM_ACTOR = ("Extent", "Future")      # monarch.X is monarch.actor.X in Monarch too
_ALGEBRA = {"Shape": "monarch_cy._actor.base.shape", "NDSlice": "monarch_cy._actor.base.shape",
            "Selection": "monarch_cy._actor.base.selection"}
_FROM_CONFIG = ("clear_runtime_config", "configure", "configured", "get_global_config",
                "get_runtime_config")

__all__ = list(_SUBMODULES) + list(_FROM_ACTOR) + list(_ALGEBRA) + list(_FROM_CONFIG)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"monarch.{name}")
    if name in _FROM_ACTOR:
        return getattr(importlib.import_module("monarch.actor"), name)
    if name in _FROM_CONFIG:
        return getattr(importlib.import_module("monarch.config"), name)
    if name in _ALGEBRA:
        return getattr(importlib.import_module(_ALGEBRA[name]), name)
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"module 'monarch' has no attribute {name!r}: monarch_cy's Monarch "
        f"compatibility layer provides only monarch.{', monarch.'.join(_SUBMODULES)} "
        f"and monarch.{', monarch.'.join(_FROM_ACTOR + tuple(_ALGEBRA) + _FROM_CONFIG)} at "
        "the top "
        "(Monarch's tensor engine names are not provided; see docs/monarch-compat.md)")


def __dir__():
    return sorted(set(globals()) | set(__all__))
