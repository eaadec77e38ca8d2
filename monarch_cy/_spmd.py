"""Running torchrun scripts over a mesh: Monarch's ``monarch.spmd``.

:class:`SPMDActor` runs a training script written for ``torchrun`` (a file, or
``-m module``, and its arguments) in every proc of a mesh, with the variables
torchrun would give it (:mod:`monarch_cy._torchrun`); :func:`setup_torch_elastic_env`
only sets them, for code of your own that calls ``init_process_group``.

Semantics, where Monarch's docs are silent:

* ``RANK``/``WORLD_SIZE`` are the actor mesh's (on a whole proc mesh, what
  ``spawn_procs`` already set); ``LOCAL_*`` and ``GROUP_*`` follow Monarch's rule:
  the mesh's last dimension is one node's procs (``LOCAL_RANK`` = the coordinate
  there, ``LOCAL_WORLD_SIZE`` its size, ``GROUP_RANK = RANK // LOCAL_WORLD_SIZE``),
  also for a mesh whose first dimensions are not real hosts
  (``per_host={"hosts": 2, "gpus": 4}`` on one machine: ``LOCAL_WORLD_SIZE=4``,
  where ``spawn_procs`` set the 8 procs of the machine).
* ``main`` runs the script in the actor's thread with ``__name__ == "__main__"``,
  ``sys.argv`` set and its folder first on ``sys.path`` (both restored after); its
  output reaches the client like any actor output (``logging_option``).  GPUs
  pinned by ``spawn_procs`` are unpinned first (every GPU of the host visible, as
  under torchrun, so ``torch.cuda.set_device(LOCAL_RANK)`` works), unless CUDA is
  already initialized in the proc.  A default process group the script left
  initialized is destroyed afterwards, as the end of torchrun's worker process
  would, so ``main`` can run again in the same proc.
* Bad arguments (no script, a script file that does not exist, a bad master
  address or port) fail the call with an ``ActorError``; the proc lives on.
* Failures of the script end the proc, as they end a torchrun worker process (whose
  ``torch.distributed`` state could not be trusted for another run): an exception
  raised by the script (its traceback logged to the client, status 1),
  ``sys.exit(n)`` with ``n`` not 0 (status ``n``), a crash.  Supervision reports
  the rank: ``main`` raises ``SupervisionError`` naming it and the status, where
  Monarch's ``SPMDActor`` answers an exception with an ``ActorError`` instead.
  The other ranks then usually wait in a collective or in ``init_process_group``
  until it times out (the script's ``timeout=``), then fail the same way.
  ``proc_mesh.respawn()`` restarts the failed ranks and the same actor mesh can
  run ``main`` again (at a fresh ``get_host_port``; the respawned procs have
  ``TORCHELASTIC_RESTART_COUNT`` one higher).  torchrun would kill the waiting
  ranks at once instead of letting them time out.
"""

from __future__ import annotations

import enum
import json
import math
import os
import runpy
import socket
import sys

from monarch_cy._actor.model.actor import Actor, current_rank, current_size
from monarch_cy._actor.model.endpoint import endpoint
from monarch_cy._checks import is_int
from monarch_cy._torchrun import free_local_port

__all__ = ["AddrType", "SPMDActor", "setup_torch_elastic_env",
           "setup_torch_elastic_env_async"]


class AddrType(enum.Enum):
    """Which address ``get_host_port`` reports (Monarch's
    ``monarch.tools.network.AddrType``)."""
    IPv4 = socket.AF_INET
    IPv6 = socket.AF_INET6


def _address(use_ipaddr) -> str:
    host = socket.gethostname()
    if use_ipaddr is None:
        return host
    if not isinstance(use_ipaddr, AddrType):
        raise TypeError(f"use_ipaddr must be an AddrType or None, not {use_ipaddr!r}")
    infos = socket.getaddrinfo(host, None, use_ipaddr.value, socket.SOCK_STREAM)
    if not infos:
        raise OSError(f"host {host!r} has no {use_ipaddr.name} address")
    return infos[0][4][0]


def _check_master(master_addr, master_port) -> None:
    if not isinstance(master_addr, str) or not master_addr:
        raise ValueError(f"master_addr must be a non-empty str, not {master_addr!r}")
    if not is_int(master_port) or not 0 < master_port < 65536:
        raise ValueError(f"master_port must be an int in 1..65535, not {master_port!r}")


def _unpin_gpus() -> None:
    from monarch_cy import _config
    before = _config.gpu_unpinned()
    if before is None:
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return                           # too late: the proc keeps its one device
    for var, value in json.loads(before).items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
    os.environ.pop("MONARCH_CY_GPU_UNPINNED", None)


class SPMDActor(Actor):
    """Sets torchrun's variables and runs torchrun scripts (see the module docstring).

    Endpoints (Monarch's): ``get_host_port(use_ipaddr)`` -> ``(address, free
    port)`` of this proc's host; ``setup_env(master_addr, master_port)``;
    ``main(master_addr, master_port, script_args)`` -> ``True``.
    """

    def __init__(self) -> None:
        point = current_rank()
        sizes = current_size()
        self.rank = point.rank
        self.world_size = math.prod(sizes.values())
        # Monarch's rule: the mesh's last dimension is one node's procs
        last = point.extent.labels[-1] if point.extent.labels else None
        self.local_world_size = sizes[last] if last is not None else 1
        self.local_rank = point[last] if last is not None else 0

    def _setup_env(self, master_addr: str, master_port: int) -> None:
        _check_master(master_addr, master_port)
        lws = self.local_world_size
        os.environ.update({
            "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
            "RANK": str(self.rank), "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(self.local_rank), "LOCAL_WORLD_SIZE": str(lws),
            "GROUP_RANK": str(self.rank // lws),
            "GROUP_WORLD_SIZE": str((self.world_size + lws - 1) // lws),
            "ROLE_RANK": str(self.rank), "ROLE_WORLD_SIZE": str(self.world_size),
            "ROLE_NAME": "default", "TORCHELASTIC_USE_AGENT_STORE": "False",
        })

    @endpoint
    def get_host_port(self, use_ipaddr: AddrType | None = None) -> tuple[str, int]:
        return _address(use_ipaddr), free_local_port("")

    @endpoint
    def setup_env(self, master_addr: str, master_port: int) -> None:
        self._setup_env(master_addr, master_port)

    @endpoint
    def main(self, master_addr: str, master_port: int, script_args: list[str]) -> bool:
        if isinstance(script_args, str) or not script_args or \
                not all(isinstance(a, str) for a in script_args):
            raise ValueError("script_args must be a non-empty list of str: a script "
                             f"path or '-m', 'module', then arguments; not {script_args!r}")
        if script_args[0] == "-m" and len(script_args) < 2:
            raise ValueError(f"script_args {script_args!r}: '-m' needs a module name")
        if script_args[0] != "-m" and not os.path.isfile(script_args[0]):
            raise FileNotFoundError(f"script {script_args[0]!r} does not exist on rank "
                                    f"{self.rank} ({socket.gethostname()})")
        self._setup_env(master_addr, master_port)
        _unpin_gpus()
        saved_argv, saved_path = list(sys.argv), list(sys.path)
        try:
            if script_args[0] == "-m":
                sys.argv = [script_args[1], *script_args[2:]]
                sys.path.insert(0, os.getcwd())
                runpy.run_module(script_args[1], run_name="__main__", alter_sys=True)
            else:
                path = script_args[0]
                sys.argv = list(script_args)
                sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
                runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                _exit_like_a_worker(e.code, f"the script called sys.exit({e.code!r})")
        except BaseException as e:  # noqa: BLE001 - as a torchrun worker, the proc ends
            from monarch_cy._log import logger
            logger("spmd").error("the script failed on rank %s", self.rank, exc_info=True)
            _exit_like_a_worker(1, f"the script raised {type(e).__name__}: {e}")
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
            _destroy_leftover_group()
        return True


def _exit_like_a_worker(code, why: str) -> None:
    """A failing torchrun script ends its worker process: end this proc the same
    way, so supervision reports the rank with that exit status."""
    import traceback
    from monarch_cy._log import logger
    status = code if is_int(code) and 0 < code < 256 else 1
    logger("spmd").error("%s on rank %s; this proc exits with status %d", why,
                         os.environ.get("RANK"), status)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
    os._exit(status)


def _destroy_leftover_group() -> None:
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - best effort, as a process exit would be
        pass


def _check_pair(master_addr, master_port) -> None:
    if (master_addr is None) != (master_port is None):
        raise ValueError("give both master_addr and master_port, or neither; got "
                         f"master_addr={master_addr!r}, master_port={master_port!r}")


def _first(proc_mesh, am):
    return am.slice(**dict.fromkeys(proc_mesh._labels, 0))


def setup_torch_elastic_env(proc_mesh, master_addr: str | None = None,
                            master_port: int | None = None,
                            use_ipaddr: AddrType | None = None) -> None:
    """Set torchrun's variables in every proc of ``proc_mesh`` (blocking).  Without
    ``master_addr``/``master_port`` (give both or neither), the first proc's host
    and a free port there are used."""
    _check_pair(master_addr, master_port)
    am = proc_mesh.spawn("_SPMDActor", SPMDActor)
    if master_addr is None:
        master_addr, master_port = _first(proc_mesh, am).get_host_port.call_one(
            use_ipaddr).get()
    _check_master(master_addr, master_port)
    am.setup_env.call(master_addr, master_port).get()


async def setup_torch_elastic_env_async(proc_mesh, master_addr: str | None = None,
                                        master_port: int | None = None,
                                        use_ipaddr: AddrType | None = None) -> None:
    """:func:`setup_torch_elastic_env`, awaitable."""
    _check_pair(master_addr, master_port)
    am = proc_mesh.spawn("_SPMDActor", SPMDActor)
    if master_addr is None:
        master_addr, master_port = await _first(proc_mesh, am).get_host_port.call_one(
            use_ipaddr)
    _check_master(master_addr, master_port)
    await am.setup_env.call(master_addr, master_port)
