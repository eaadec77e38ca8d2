"""Worker side: ``breakpoint()`` and ``pdb.set_trace()`` start the remote debugger.

A worker's stdin is ``/dev/null``: a plain pdb would read end-of-input and raise
``BdbQuit`` into the endpoint.  :func:`install` (run once per worker by the actor
wiring) points ``sys.breakpointhook`` and ``pdb.set_trace`` at :func:`breakpointhook`,
which pauses the calling thread under a :class:`monarch_cy._debug.remote_pdb.RemotePdb`
whose input and output travel to the controller.  ``PYTHONBREAKPOINT`` still wins
(``PYTHONBREAKPOINT=0`` disables ``breakpoint()``, as in any Python program).

This module imports only the standard library: the debugger itself is imported at
the first breakpoint.
"""

from __future__ import annotations

import os
import sys

__all__ = ["install", "breakpointhook"]


def breakpointhook(*args, **kws):
    """``sys.breakpointhook`` of a worker: pause the caller's frame under the remote
    debugger.  ``PYTHONBREAKPOINT`` set to something else than empty is honoured as
    by :func:`sys.__breakpointhook__` (``0``: do nothing)."""
    hookname = os.environ.get("PYTHONBREAKPOINT")
    if hookname:
        return sys.__breakpointhook__(*args, **kws)
    from monarch_cy._debug.remote_pdb import set_trace  # deferred: import time
    return set_trace(sys._getframe(1), header=kws.get("header"))


def _pdb_set_trace(*, header=None):
    """``pdb.set_trace()`` in a worker: the same as ``breakpoint()``."""
    from monarch_cy._debug.remote_pdb import set_trace  # deferred: import time
    return set_trace(sys._getframe(1), header=header)


def install() -> None:
    """Make ``breakpoint()`` and ``pdb.set_trace()`` of this process remote."""
    import pdb
    sys.breakpointhook = breakpointhook
    pdb.set_trace = _pdb_set_trace
