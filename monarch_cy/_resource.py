"""Lifetime rules shared by every owning object (GPU memory, verbs resources,
collective groups, ...).

* ``close()`` releases at once and is idempotent; after it, every operation
  raises :class:`~monarch_cy.errors.ResourceClosedError`.
* Each object is a context manager whose ``__exit__`` closes it (``Device``
  documents its own variant, groups abort on an exception).
* The finalizer (garbage collection without ``close()``) never raises, never
  frees in a forked child (the creating pid is recorded), and does nothing
  once the interpreter is shutting down, when the runtime may already be gone.
* Exactly one of ``close()``, ``abort()`` and the finalizer releases: each takes
  the release back from the finalizer first (``weakref.finalize.detach``, which
  only one caller wins), so nothing is freed twice even when they race.
* A child holds a strong reference to its parent (a buffer to its ``Device``);
  a parent keeps weak references to its children so that it can close them
  first.

:class:`Abortable` adds a second way to end, ``abort()``, for resources that
have one (collective groups): release at once without waiting for pending
work or peers; afterwards operations raise the subclass's aborted error.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any, Callable

from monarch_cy._errors import ResourceClosedError


def _pin(objs: tuple) -> None:
    """Keep ``objs`` alive for the rest of the process, through interpreter
    shutdown too: one reference each that nothing ever drops."""
    import ctypes

    for obj in objs:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def _release_quietly(release: Callable[..., Any], pid: int, args: tuple, pin: bool) -> None:
    """Finalizer body: never raises, never runs in a forked child or at shutdown."""
    if os.getpid() != pid:
        if pin:
            _pin(args)
        return
    if sys.is_finalizing():
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

    ``_pin_in_child`` (class attribute, default ``False``): set it where the
    arguments are Python objects whose *destruction* frees the resource (a
    torch ``ProcessGroupGloo`` joins its threads): in a forked child, where
    nothing is freed, ``close()`` and the finalizer then keep the arguments
    alive for good instead of dropping them.
    """

    __slots__ = ("_finalizer", "_closed", "_pid", "__weakref__")
    _pin_in_child = False

    def __init__(self) -> None:
        self._finalizer: weakref.finalize | None = None
        self._closed = False
        self._pid = os.getpid()

    def _own(self, release: Callable[..., Any], *args: Any) -> None:
        fin = weakref.finalize(self, _release_quietly, release, self._pid, args, self._pin_in_child)
        fin.atexit = False
        self._finalizer = fin

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ResourceClosedError(f"{type(self).__name__} is closed")

    def _take(self) -> tuple[Callable[..., Any], tuple] | None:
        """Take the release back from the finalizer: ``(release, args)`` to run
        now, or ``None`` where nothing is to be freed here (borrowed, already
        released by another caller, or a forked child: the parent owns it)."""
        fin, self._finalizer = self._finalizer, None
        if fin is None:
            return None
        detached = fin.detach()
        if detached is None:
            return None
        _, _, (release, _pid, args, _), _ = detached
        if os.getpid() != self._pid:
            if self._pin_in_child:
                _pin(args)
            return None
        return release, args

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
        taken = self._take()
        if taken is not None:
            self._close_owned(*taken)

    def _before_close(self) -> None:
        """Hook: close children, refuse while views are alive (may raise)."""

    def _close_owned(self, release: Callable[..., Any], args: tuple) -> None:
        """Hook: what ``close()`` runs in the owning process, once.  Default:
        ``release(*args)``, the finalizer's function.  :class:`Abortable`
        subclasses put their orderly release here."""
        release(*args)

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Abortable(Owned):
    """An :class:`Owned` resource that can also be aborted.

    * ``_own(abort_fn, *args)`` registers the *abort* function: the finalizer
      runs it (so garbage collection never waits on peers) and so does
      ``abort()``.  ``close()`` runs :meth:`_close_owned`, which subclasses
      override with their orderly release (it may block until pending work is
      done: ``ncclCommDestroy``); the default is the abort function.
    * ``abort(reason)`` releases at once, cancelling pending work; it is
      idempotent, does nothing after ``close()`` (nothing is left to abort) and
      may be called from any thread.  It does not interrupt a ``close()``
      already running.  Errors of the abort function propagate: an abort
      function that expects a failure report (aborting a broken communicator
      reports the breakage again) catches it itself.
    * After ``abort()``, ``aborted`` is the reason and every operation raises
      ``_aborted_error`` (a ``ResourceClosedError`` subclass) naming it;
      ``closed`` is true too.  In a forked child ``abort()`` marks the object
      aborted and frees nothing.
    """

    __slots__ = ("_aborted",)
    _aborted_error: type[ResourceClosedError] = ResourceClosedError

    def __init__(self) -> None:
        Owned.__init__(self)
        self._aborted: str | None = None

    @property
    def aborted(self) -> str | None:
        """Why the object was aborted, or ``None`` if it was not."""
        return self._aborted

    def _check_open(self) -> None:
        if self._aborted is not None:
            raise self._aborted_error(f"{type(self).__name__} was aborted: {self._aborted}")
        Owned._check_open(self)

    def abort(self, reason: str = "abort() was called") -> None:
        """Release at once without waiting for pending work (see class doc)."""
        if self._closed:
            return
        self._aborted = str(reason)
        self._closed = True
        taken = self._take()
        if taken is not None:
            release, args = taken
            release(*args)
