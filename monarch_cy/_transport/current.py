"""This process's node: the one slot that holds it, and the one way to make it.

Imports nothing but :mod:`threading`, so that code which only asks "is there a node
yet?" (the actor model's public face, at import) does not load the transport.
"""

from __future__ import annotations

import threading

__all__ = ["set_node", "current_node", "node_or_make"]

_node = None                   # this process's node (set by whoever makes it)
_node_lock = threading.Lock()  # held while making it


def set_node(node) -> None:
    """Make ``node`` this process's node (a worker's bootstrap, before user code)."""
    global _node
    _node = node


def current_node():
    """The node if one exists, else None (never creates one; the actor model's
    ``get_node`` makes the controller's on first use, :func:`node_or_make`)."""
    return _node


def node_or_make(make):
    """This process's node; when there is none yet, ``make()`` makes it, once, under
    a lock (thread-safe: concurrent first callers get the same node)."""
    global _node
    node = _node
    if node is not None:
        return node
    with _node_lock:
        if _node is None:
            _node = make()
        return _node
