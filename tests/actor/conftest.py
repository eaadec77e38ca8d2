"""Fixtures for the actor tests: shared proc meshes, and a leak check at the end.

Actor classes live in ``_actors.py`` (importable by the worker procs: the
controller's ``sys.path`` travels to them).
"""

from __future__ import annotations

import itertools
import os
import sys

import pytest

from _leakcheck import no_leaks

sys.path.insert(0, os.path.dirname(__file__))

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
