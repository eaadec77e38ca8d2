"""Fixtures for tests/hosts (helpers live in _hosts_support, a unique module name)."""

from _hosts_support import hosts3, netns_ok  # noqa: F401
