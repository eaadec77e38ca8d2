"""Re-exports only: the ``__module__`` of ``Event`` (pickles name it), which is
defined in :mod:`monarch_cy._gpu._event`.
"""

from monarch_cy._gpu._event import Event

__all__ = ["Event"]
