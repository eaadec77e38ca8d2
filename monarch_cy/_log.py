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
"""

from __future__ import annotations

import logging
import sys

__all__ = ["logger", "ROOT"]

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


class _Stderr:
    """Writes to whatever ``sys.stderr`` is at the time (workers replace it with
    the forwarding stream after start-up; tests capture it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()
