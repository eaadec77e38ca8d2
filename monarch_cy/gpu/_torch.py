"""Re-exports only: the ``__module__`` of ``wrap_torch`` (pickles name it), which is
defined in :mod:`monarch_cy._gpu._torch`.
"""

from monarch_cy._gpu._torch import wrap_torch

__all__ = ["wrap_torch"]
