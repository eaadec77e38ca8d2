"""Fixtures for the transport tests that run over a real proc mesh (shared with the
actor tests: tests/_mesh_fixtures.py)."""

from __future__ import annotations

from _mesh_fixtures import _no_leaks, echo, name, procs, uniq  # noqa: F401
