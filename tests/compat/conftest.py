"""Fixtures for the Monarch-compatibility tests: a shared proc mesh.

Actor classes used by several tests live in ``_compat_actors.py`` (importable by
the worker procs: the controller's ``sys.path`` travels to them); classes defined
inside a test travel by value.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="module")
def _module_procs():
    from _mesh_fixtures import SharedProcs
    shared = SharedProcs({"procs": 2})
    yield shared
    shared.close()


@pytest.fixture
def procs(_module_procs):
    """2 procs (dimension 'procs'), shared by the tests of one module (a fresh mesh
    after a test that left an actor failed or a proc dead on it: as in Monarch, such
    a proc takes no new actors)."""
    yield _module_procs.get()
    _module_procs.check()
