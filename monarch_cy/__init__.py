"""monarch_cy: single-controller distributed training, in Python + Cython.

Importing this package is cheap and loads no GPU library: the GPU runtime is
bound on first use of :mod:`monarch_cy.gpu` (see :mod:`monarch_cy._runtime`).
"""

# The exception tree's public face, loaded with the package in every process: pickles
# name it (monarch_cy.errors.ActorError), and cloudpickle (the transport's pickler)
# pickles a class by reference only when that module is imported.  It imports only
# the flat monarch_cy._errors.
from monarch_cy.errors import MonarchCyError

__version__ = "0.1.0"

__all__ = ["MonarchCyError", "__version__"]
