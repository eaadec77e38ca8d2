"""Re-exports only: the ``__module__`` of ``Stream`` (pickles name it), which is
defined in :mod:`monarch_cy._gpu._stream`.
"""

from monarch_cy._gpu._stream import Stream

__all__ = ["Stream"]
