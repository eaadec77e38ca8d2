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
def procs():
    """2 procs (dimension 'procs'), shared by the tests of one module."""
    from monarch_cy.actor import this_host
    pm = this_host().spawn_procs(per_host={"procs": 2})
    yield pm
    pm.stop().get(10)
