"""``monarch`` under :mod:`monarch_cy.compat`: the top of Monarch's package tree.

Provides Monarch's public submodules ``monarch.actor``, ``monarch.rdma``,
``monarch.job`` and ``monarch.spmd`` (monarch_cy's own modules, imported on first
use, also as attributes: ``import monarch; monarch.actor``), and of Monarch's
top-level names only those that are the actor API's own objects (``Extent``,
``Future``).  The tensor engine (``monarch.remote``, ``monarch.Tensor``,
``monarch.fetch_shard``...) and every private module are not provided.
"""

from __future__ import annotations

import importlib

# A package (so that ``monarch.actor`` can be imported), with no directory of its
# own: the compat finder resolves every submodule.
__path__: list = []

_SUBMODULES = ("actor", "rdma", "job", "spmd")
_FROM_ACTOR = ("Extent", "Future")      # monarch.X is monarch.actor.X in Monarch too

__all__ = list(_SUBMODULES) + list(_FROM_ACTOR)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"monarch.{name}")
    if name in _FROM_ACTOR:
        return getattr(importlib.import_module("monarch.actor"), name)
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"module 'monarch' has no attribute {name!r}: monarch_cy's Monarch "
        f"compatibility layer provides only monarch.{', monarch.'.join(_SUBMODULES)} "
        f"and monarch.{', monarch.'.join(_FROM_ACTOR)}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
