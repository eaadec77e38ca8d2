"""Fixtures for the RDMABuffer tests: one shared 2-proc mesh, and a leak check.

Actor classes live in ``_rdma_actors.py`` (importable by the worker procs: the
controller's ``sys.path`` travels to them).
"""

from __future__ import annotations

import os
import sys

import pytest

from _leakcheck import no_leaks

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="session", autouse=True)
def _no_leaks():
    with no_leaks():
        yield


@pytest.fixture(scope="session")
def pair():
    """``(holder, reader)``: one actor each on two procs of one mesh."""
    from monarch_cy.actor import this_host
    from _rdma_actors import Holder, Reader
    procs = this_host().spawn_procs(per_host={"procs": 2})
    holder = procs.slice(procs=0).spawn("holder", Holder)
    reader = procs.slice(procs=1).spawn("reader", Reader)
    yield holder, reader
    procs.stop().get(timeout=10)


@pytest.fixture(autouse=True)
def _no_backend_env(monkeypatch):
    monkeypatch.delenv("MONARCH_CY_RDMA_BACKEND", raising=False)
