"""Fixtures for the actor tests: shared proc meshes, and a leak check at the end.

Actor classes live in ``_actors.py`` (importable by the worker procs: the
controller's ``sys.path`` travels to them).
"""

from __future__ import annotations

import itertools
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

_names = itertools.count()


def uniq(prefix: str = "a") -> str:
    return f"{prefix}{next(_names)}"


def children() -> list:
    """Pids of every descendant of this process (procs are forked by a zygote
    child), zombies included."""
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
