"""Lifetime rules shared by every owning object (GPU memory, verbs resources, ...).

* ``close()`` releases at once and is idempotent; after it, every operation
  raises :class:`~monarch_cy.errors.ResourceClosedError`.
* Each object is a context manager whose ``__exit__`` closes it (``Device``
  documents its own variant).
* The finalizer (garbage collection without ``close()``) never raises, never
  frees in a forked child (the creating pid is recorded), and does nothing
  once the interpreter is shutting down, when the runtime may already be gone.
* A child holds a strong reference to its parent (a buffer to its ``Device``);
  a parent keeps weak references to its children so that it can close them
  first.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any, Callable

from monarch_cy._errors import ResourceClosedError


def _release_quietly(release: Callable[..., Any], pid: int, args: tuple) -> None:
    """Finalizer body: never raises, never runs in a forked child or at shutdown."""
    if os.getpid() != pid or sys.is_finalizing():
        return
    try:
        release(*args)
    except BaseException:  # noqa: BLE001 - a finalizer must not raise
        pass


class Owned:
    """Base of objects that own (or borrow) one runtime resource.

    Subclasses call :meth:`_own` once with the release function and its
    arguments (which must not reference ``self``), or never, for borrowed
    resources.
    """

    __slots__ = ("_finalizer", "_closed", "_pid", "__weakref__")

    def __init__(self) -> None:
        self._finalizer: weakref.finalize | None = None
        self._closed = False
        self._pid = os.getpid()

    def _own(self, release: Callable[..., Any], *args: Any) -> None:
        fin = weakref.finalize(self, _release_quietly, release, self._pid, args)
        fin.atexit = False
        self._finalizer = fin

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ResourceClosedError(f"{type(self).__name__} is closed")

    def close(self) -> None:
        """Release the resource now; idempotent.

        Errors from the runtime during an explicit close propagate (the object
        counts as closed all the same, so nothing is freed twice).  In a forked
        child nothing is freed: the parent owns it.
        """
        if self._closed:
            return
        self._before_close()
        self._closed = True
        fin, self._finalizer = self._finalizer, None
        if fin is None:
            return
        detached = fin.detach()
        if detached is None or os.getpid() != self._pid:
            return
        _, _, (release, _pid, args), _ = detached
        release(*args)

    def _before_close(self) -> None:
        """Hook: close children, refuse while views are alive (may raise)."""

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
