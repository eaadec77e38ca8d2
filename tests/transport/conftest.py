"""Fixtures for the transport tests: a unix:// inbox with an outlet to it, and those
that run over a real proc mesh (shared with the actor tests: tests/_mesh_fixtures.py)."""

from __future__ import annotations

import os

import pytest

from _mesh_fixtures import _no_leaks, _shared_procs, echo, name, procs, uniq  # noqa: F401


@pytest.fixture()
def pair(tmp_path):
    """``(inbox, outlet to it, job secret)`` on a fresh ``unix://`` address."""
    from monarch_cy._transport import unixsock as u
    secret = os.urandom(32)
    addr = f"unix://{tmp_path}/box"
    box = u.Inbox(addr, secret)
    out = u.Outlet(addr, secret)
    yield box, out, secret
    out.close()
    box.close()
