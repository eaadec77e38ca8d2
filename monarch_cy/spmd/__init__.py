"""monarch_cy.spmd: run torchrun-style scripts on a mesh (Monarch's ``monarch.spmd``).

Re-exports only; see :mod:`monarch_cy._spmd` for the semantics.  Every proc of a
mesh already has torchrun's variables from ``spawn_procs``
(:mod:`monarch_cy._torchrun`); :class:`SPMDActor` runs a script as torchrun would,
:func:`setup_torch_elastic_env` (and its ``async`` twin) sets the variables with a
master address of your choice.  Monarch's ``monarch.job.spmd`` (``serve``,
``SPMDJob`` over torchx AppDefs) is not provided.
"""

from monarch_cy._spmd import (AddrType, SPMDActor, setup_torch_elastic_env,
                              setup_torch_elastic_env_async)

__all__ = ["AddrType", "SPMDActor", "setup_torch_elastic_env",
           "setup_torch_elastic_env_async"]
