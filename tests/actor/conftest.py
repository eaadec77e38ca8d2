"""Fixtures for the actor tests: the shared proc mesh fixtures (tests/_mesh_fixtures.py).

Actor classes live in ``_actors.py`` (importable by the worker procs: the
controller's ``sys.path`` travels to them).
"""

from __future__ import annotations

from _mesh_fixtures import _no_leaks, echo, name, procs, uniq  # noqa: F401
