"""Re-exports only: the ``__module__`` of ``IpcHandle`` and ``IpcMapping`` (pickles
name it: an ``IpcHandle`` travels in RDMA buffer handles), which are defined in
:mod:`monarch_cy._gpu._ipc`.
"""

from monarch_cy._gpu._ipc import IpcHandle, IpcMapping

__all__ = ["IpcHandle", "IpcMapping"]
