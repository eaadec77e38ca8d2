"""The runtime's own messages go through :mod:`logging`, under the ``monarch_cy`` logger.

``logger("actor")`` is ``logging.getLogger("monarch_cy.actor")``; every module asks
for the logger of its layer (``actor``, ``transport``, ``hosts``, ``rdma``, ...), so
a program can raise or silence one layer with the standard API
(``logging.getLogger("monarch_cy.transport").setLevel(logging.ERROR)``).

Where the messages go:

* ``MONARCH_CY_LOG_LEVEL`` unset (the default): the ``monarch_cy`` loggers have no
  handler of their own.  Records propagate to the program's ``logging``
  configuration; with none, ``logging``'s last-resort handler writes warnings and
  errors to stderr, as the bare message (so a failure the runtime reports still
  shows up on a laptop with no set-up).
* ``MONARCH_CY_LOG_LEVEL=debug|info|warning|error|critical``: the ``monarch_cy``
  logger gets that level and one stderr handler (``name level: message``), and stops
  propagating (no line is written twice).

In worker processes stderr is forwarded to the controller (:mod:`._actor.logs`), so
their records reach the controller's terminal with the proc's prefix.  The variable
is read once per process, at the first call to :func:`logger`.

:class:`RateLimited` bounds the lines of one kind of message (refused connections
under a connection flood): the first few per interval, then one summary line with
the count of those it held back.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

__all__ = ["logger", "ROOT", "RateLimited"]

ROOT = "monarch_cy"
_configured = False


def logger(layer: str) -> logging.Logger:
    """The logger of one layer of the runtime, ``monarch_cy.<layer>``."""
    if not _configured:
        _configure()
    return logging.getLogger(f"{ROOT}.{layer}")


def _configure() -> None:
    global _configured
    _configured = True
    from monarch_cy import _config
    level = _config.log_level()
    if level is None:
        return
    root = logging.getLogger(ROOT)
    root.setLevel(level.upper())
    handler = logging.StreamHandler(_Stderr())
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
    root.addHandler(handler)
    root.propagate = False


class RateLimited:
    """One kind of message, logged at a bounded rate (thread-safe).

    A window opens at the first message and lasts ``interval`` seconds: its first
    ``burst`` messages are logged as given, the rest only counted.  When the window
    has ended, the next message -- or :meth:`flush`, which the owner calls from its
    loop -- logs one summary line, ``"... and N more <what> in the last S s (not
    logged one by one)"``, and the next message opens a new window.  So a flood costs
    at most ``burst + 1`` lines per interval.  ``log`` is a :class:`logging.Logger`
    or a layer name for :func:`logger` (resolved at the first message, so making one
    at import reads no configuration).
    """

    def __init__(self, log, what: str, *, burst: int = 5, interval: float = 60.0,
                 level: int = logging.WARNING) -> None:
        self._log = log
        self.what = what
        self.burst = burst
        self.interval = interval
        self.level = level
        self._lock = threading.Lock()
        self._start = None            # monotonic start of the open window, or None
        self._logged = 0              # messages logged in the open window
        self.suppressed = 0           # messages held back in the open window

    def _logger(self) -> logging.Logger:
        if isinstance(self._log, str):
            self._log = logger(self._log)
        return self._log

    def log(self, msg: str, *args, exc_info=None) -> bool:
        """Log ``msg % args`` unless this window's burst is spent; True if logged.
        ``exc_info`` goes with the lines logged (``True``: the exception being
        handled, so a burst of 1 gives one full traceback per interval, then a count)."""
        now = time.monotonic()
        with self._lock:
            if self._start is not None and now - self._start >= self.interval:
                self._summary(now)
            if self._start is None:
                self._start, self._logged = now, 0
            if self._logged >= self.burst:
                self.suppressed += 1
                return False
            self._logged += 1
        self._logger().log(self.level, msg, *args, exc_info=exc_info)
        return True

    def due(self) -> float | None:
        """The monotonic time at which :meth:`flush` will have a summary to log (None
        while nothing is held back)."""
        start = self._start
        return None if not self.suppressed or start is None else start + self.interval

    def flush(self, force: bool = False) -> None:
        """Log the summary of the window if it has ended (``force``: now, e.g. when
        the owner closes) and messages were held back; cheap when none were."""
        if not self.suppressed:
            return
        now = time.monotonic()
        with self._lock:
            if self._start is not None and (force or now - self._start >= self.interval):
                self._summary(now)

    def _summary(self, now: float) -> None:
        n, start = self.suppressed, self._start
        self._start, self._logged, self.suppressed = None, 0, 0
        if n:
            self._logger().log(self.level, "... and %d more %s in the last %.0f s (not "
                               "logged one by one)", n, self.what, now - start)


class _Stderr:
    """Writes to whatever ``sys.stderr`` is at the time (workers replace it with
    the forwarding stream after start-up; tests capture it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()
