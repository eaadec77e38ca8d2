"""monarch_cy: single-controller distributed training, in Python + Cython.

Importing this package is cheap and loads no GPU library: the GPU runtime is
bound on first use of :mod:`monarch_cy.gpu` (see :mod:`monarch_cy._runtime`).
"""

from monarch_cy._errors import MonarchCyError

__version__ = "0.1.0"

__all__ = ["MonarchCyError", "__version__"]
