"""Fixtures for the actor tests: the shared proc mesh fixtures (tests/_mesh_fixtures.py).

Actor classes live in ``_actors.py`` (importable by the worker procs: the
controller's ``sys.path`` travels to them).
"""

from __future__ import annotations

import pytest

from _mesh_fixtures import _no_leaks, _shared_procs, echo, name, procs, uniq  # noqa: F401


@pytest.fixture
def tree(monkeypatch):
    """9 procs at a cast fan-out of 2: a mesh of them spawns, casts and heartbeats down
    a 3-level tree (monarch_cy._actor.cast.tree)."""
    from monarch_cy._actor.cast import tree as cast_tree
    from monarch_cy.actor import this_host
    monkeypatch.setattr(cast_tree, "_FANOUT", 2)
    pm = this_host().spawn_procs(per_host={"gpus": 9})
    yield pm
    pm.stop().get(30)


@pytest.fixture
def nogil_tree(monkeypatch, tree):
    """``tree`` with casts passed on and replies gathered by the procs' nogil
    forwarders (``MONARCH_CY_CAST_NOGIL=1``, the default), whatever the environment."""
    from monarch_cy._actor.cast import tree as cast_tree
    monkeypatch.setattr(cast_tree, "_NOGIL", True)
    return tree


@pytest.fixture
def io_tree(monkeypatch, tree):
    """``tree`` with casts forwarded by the procs' I/O threads, replies gathered and
    folded per subtree (``MONARCH_CY_CAST_NOGIL=0``), for the tests of that path."""
    from monarch_cy._actor.cast import tree as cast_tree
    monkeypatch.setattr(cast_tree, "_NOGIL", False)
    return tree


@pytest.fixture
def hook(monkeypatch):
    """Replace the client's fault hook; yields the list of failures it received."""
    import monarch_cy.actor as api
    got = []
    monkeypatch.setattr(api, "unhandled_fault_hook", got.append)
    return got
