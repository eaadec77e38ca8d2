"""monarch_cy.spmd: counterpart of Monarch's ``monarch.spmd`` (exports nothing yet).

Monarch's ``monarch.spmd`` exports ``SPMDActor`` (runs a torchrun-style script in
every proc), ``setup_torch_elastic_env(proc_mesh, master_addr=None,
master_port=None, use_ipaddr=None)`` and its ``async`` twin
``setup_torch_elastic_env_async``; ``monarch.job.spmd`` adds ``serve`` and
``SPMDJob`` (torchx AppDefs).  None of them is provided here.

The nearest monarch_cy equivalent is
:func:`monarch_cy.collectives.setup_torch_distributed` ``(mesh, *, master_port=None)``:
it sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` in every proc of a mesh, so that actors can call
``torch.distributed.init_process_group()``.  It is not re-exported under Monarch's
name because the semantics differ: no ``master_addr``/``use_ipaddr`` parameters
(Monarch's second positional parameter is ``master_addr``), no ``GROUP_RANK``,
``GROUP_WORLD_SIZE``, ``ROLE_RANK``, ``ROLE_WORLD_SIZE``, ``ROLE_NAME``;
``LOCAL_RANK`` is a proc's index among the mesh's procs on its host, where Monarch
uses the coordinate of the mesh's last dimension (they differ for
``per_host={"hosts": 2, "gpus": 4}`` on one host); it returns the master address
and port where Monarch returns None; and there is no async variant.
"""

__all__: list = []
