"""Fixtures shared by the test folders that need a running proc mesh (imported by
their conftest.py): a session's 4-proc mesh, an echo actor, unique names, and a
leak check at the end of the session.

Actor classes live in ``tests/actor/_actors.py``, importable by the worker procs
(the controller's ``sys.path`` travels to them).
"""

from __future__ import annotations

import itertools
import os
import sys

import pytest

from _leakcheck import no_leaks

ACTORS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "actor")
if ACTORS_DIR not in sys.path:
    sys.path.insert(0, ACTORS_DIR)

_names = itertools.count()


def uniq(prefix: str = "a") -> str:
    return f"{prefix}{next(_names)}"


@pytest.fixture(scope="session", autouse=True)
def _no_leaks():
    with no_leaks():
        yield


@pytest.fixture(scope="session")
def procs():
    """4 procs (dimension 'gpus'), shared by the tests of the session."""
    from monarch_cy.actor import this_host
    pm = this_host().spawn_procs(per_host={"gpus": 4})
    yield pm
    pm.stop().get(10)


@pytest.fixture(scope="session")
def echo(procs):
    from _actors import Echo
    return procs.spawn("echo", Echo, "e")


@pytest.fixture()
def name():
    return uniq()
