"""Fixtures for the RDMABuffer tests: one shared 2-proc mesh, and a leak check.

Actor classes live in ``_rdma_actors.py`` (importable by the worker procs: the
controller's ``sys.path`` travels to them).
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def children() -> list:
    """Pids of every descendant of this process, zombies included."""
    parent = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d)] = int(fields[1])
    out, frontier = [], {os.getpid()}
    while frontier:
        kids = {p for p, pp in parent.items() if pp in frontier}
        out.extend(kids)
        frontier = kids
    return out


@pytest.fixture(scope="session", autouse=True)
def _no_leaks():
    shm_before = set(os.listdir("/dev/shm"))
    kids_before = set(children())
    yield
    from monarch_cy._actor import node as _node
    if _node.current_node() is not None:
        from monarch_cy._actor.proc_mesh import stop_all
        stop_all(grace=3.0)
    leftover = set(children()) - kids_before
    assert not leftover, f"child processes left behind: {leftover}"
    new_shm = set(os.listdir("/dev/shm")) - shm_before
    assert not new_shm, f"/dev/shm segments left behind: {new_shm}"


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
