"""Fixtures shared by the test folders that need a running proc mesh (imported by
their conftest.py): a session's 4-proc mesh (replaced after a test that left it
unable to take actors), an echo actor, unique names, and a leak check at the end of
the session.

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


class SharedProcs:
    """A proc mesh shared by many tests, replaced when a test leaves it unable to
    take new actors.  As in Monarch, a proc where an actor failed refuses new
    actors (``error spawning actor mesh``); so do dead procs.  After each test a
    probe actor mesh is spawned and asked :attr:`initialized`; if that fails, the
    mesh is stopped and the next test gets a fresh one."""

    def __init__(self, per_host: dict) -> None:
        self.per_host = per_host
        self.pm = None
        self.extras = {}           # fixtures made on this mesh (echo), dropped with it

    def get(self):
        if self.pm is None:
            from monarch_cy.actor import this_host
            self.pm = this_host().spawn_procs(per_host=self.per_host)
        return self.pm

    def check(self) -> None:
        """After a test: keep the mesh if every proc still takes actors."""
        from _actors import Echo
        pm = self.pm
        if pm is None:
            return
        try:
            probe = pm.spawn(uniq("probe"), Echo)
            probe.initialized.get(30)
            probe.stop().get(30)
            return
        except Exception:  # noqa: BLE001 - any failure: a fresh mesh for the next test
            pass
        self.close()

    def close(self) -> None:
        pm, self.pm, self.extras = self.pm, None, {}
        if pm is not None:
            try:
                pm.stop().get(10)
            except Exception:  # noqa: BLE001 - already stopped, or its procs died
                pass


@pytest.fixture(scope="session")
def _shared_procs():
    shared = SharedProcs({"gpus": 4})
    yield shared
    shared.close()


@pytest.fixture
def procs(_shared_procs):
    """4 procs (dimension 'gpus'), shared by the tests of the session (a fresh mesh
    after a test that left an actor failed or a proc dead on it)."""
    yield _shared_procs.get()
    _shared_procs.check()


@pytest.fixture
def echo(procs, _shared_procs):
    """An Echo actor mesh on ``procs``, shared while ``procs`` is."""
    from _actors import Echo
    m = _shared_procs.extras.get("echo")
    if m is None:
        m = _shared_procs.extras["echo"] = procs.spawn("echo", Echo, "e")
    return m


@pytest.fixture()
def name():
    return uniq()
