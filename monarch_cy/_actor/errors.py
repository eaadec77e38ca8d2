"""Errors of the actor layer (defined in :mod:`monarch_cy._errors`, the one home of
the exception tree; this is their documented home and their ``__module__``).

All derive from :class:`monarch_cy._errors.MonarchCyError` and survive pickling with
their attributes (``__reduce__`` rebuilds them from constructor arguments), because
they travel between the processes of a mesh.
"""

from __future__ import annotations

from monarch_cy._errors import (ActorError, ForeignJobError, MeshIndexError,  # noqa: F401
                                MeshStoppedError, SupervisionError)

__all__ = [
    "ActorError",
    "SupervisionError",
    "MeshStoppedError",
    "MeshIndexError",
    "ForeignJobError",
]
