"""What each proc of a new mesh is started with: its environment and its command.

``HostMesh.spawn_procs`` builds one :class:`ProcStarts` per call and asks it for a
*starter* per rank: a callable that starts one incarnation of that proc and is
called again by every respawn.  A local proc's fds 1 and 2 are captured by the
controller (:mod:`.proc_output`, one per incarnation, on the launcher's handle).  The environment of a proc, lowest first:

1. what it inherits: the controller's environment (or, on a remote host, the
   agent's) updated with ``spawn_procs(env=...)``;
2. the torchrun variables (:mod:`monarch_cy._torchrun`): ``RANK``,
   ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT`` (a free port of
   rank 0's host, chosen once per mesh), ``TORCHELASTIC_RESTART_COUNT`` (this
   rank's respawns so far), ...;
3. with a ``gpus`` dimension (and pinning on), ``CUDA_VISIBLE_DEVICES`` /
   ``HIP_VISIBLE_DEVICES`` naming the device its coordinate indexes among those
   inherited (:mod:`.visible_gpus`; remote hosts map it themselves);
   a remote proc also gets the controller's ``MONARCH_CY_TELEMETRY`` and
   ``MONARCH_CY_TELEMETRY_OTLP_ENDPOINT`` (``enable_telemetry()`` sets them);
4. the ``env`` of its :class:`~.bootstrap_command.BootstrapCommand`, if any;
5. ``MONARCH_CY_RANK`` / ``MONARCH_CY_WORLD_SIZE`` (the runtime's own).

Every command is resolved, and a non-default program looked up on ``PATH``,
before the first proc starts, so a bad ``bootstrap_command`` starts nothing.
"""

from __future__ import annotations

import itertools
import os
import shutil

from monarch_cy._actor.base.shape import Point
from monarch_cy._actor.launch.bootstrap_command import resolve_bootstrap
from monarch_cy._actor.launch.launcher import start_proc
from monarch_cy._actor.launch.proc_output import ProcOutput
from monarch_cy._actor.launch.visible_gpus import assignment
from monarch_cy._torchrun import free_local_port, torchrun_env

__all__ = ["ProcStarts"]

_DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
_TELEMETRY_VARS = ("MONARCH_CY_TELEMETRY", "MONARCH_CY_TELEMETRY_OTLP_ENDPOINT")


class ProcStarts:
    """The starts of one ``spawn_procs`` call (see the module docstring)."""

    def __init__(self, node, ext, per_host_count: int, *, mesh_id: int, inherited: dict,
                 user_env: dict, pin: bool, remote, bootstrap_command, cfg: dict,
                 max_restarts: int, name: str = "procs") -> None:
        self.node, self.ext, self.per = node, ext, per_host_count
        self.mesh_id, self.name = mesh_id, name
        self.inherited, self.user_env, self.pin = inherited, user_env, pin
        self.remote, self.cfg, self.max_restarts = remote, cfg, max_restarts
        self.run_id = f"monarch_cy-{os.getpid()}-{mesh_id}"
        self.cmds = [resolve_bootstrap(bootstrap_command, Point(r, ext))
                     for r in range(ext.nelements)]
        for r, cmd in enumerate(self.cmds):
            if cmd is None or cmd.is_default_program():
                continue
            if remote is not None:
                raise ValueError(
                    f"bootstrap_command for point {Point(r, ext)} runs {cmd.program!r}; "
                    "on remote hosts only its env may differ from "
                    "default_bootstrap_cmd() (the host's agent forks every proc)")
            if shutil.which(cmd.program) is None:
                raise FileNotFoundError(
                    f"bootstrap_command for point {Point(r, ext)}: program "
                    f"{cmd.program!r} is not an executable file or on PATH")
        self.master = None           # (addr, port), set with rank 0's addresses

    def starter(self, r: int, key: str, daddr: str, host=None, bind=None,
                host_mesh=None):
        """The starter of rank ``r`` (proc key ``key``); on a remote ``host`` when
        given; ``bind``: its checked ``proc_bind`` entry (see :mod:`.proc_bind`);
        ``host_mesh``: what the proc's ``this_host()`` names (a picklable descriptor,
        ``meshes.host_refs``).  Rank 0's call also fixes the mesh's
        ``MASTER_ADDR``/``MASTER_PORT``."""
        if self.master is None:
            if host is None:
                self.master = ("127.0.0.1", free_local_port())
            else:                     # a port of the agent's range, owned by rank 0
                self.master = (host.info["ip"], int(host._alloc(key).rsplit(":", 1)[1]))
        cfg = dict(self.cfg, addr=key, daddr=daddr, proc_rank=r, bind=bind)
        if host_mesh is not None:
            cfg["host_mesh"] = host_mesh
        cmd = self.cmds[r]
        incarnations = itertools.count()
        node = self.node

        def start():
            inc = next(incarnations)
            env = self.env(r, inc)
            tag = f"p{self.mesh_id}.{r}.{inc}"
            if host is not None:         # its agent reads its FIFOs and sends us the bytes
                return host.start_proc(node, cfg, env, ProcOutput(
                    node, self.mesh_id, self.name, r, tag, fifos=False))
            out = ProcOutput(node, self.mesh_id, self.name, r, tag)
            try:
                h = start_proc(node, dict(cfg, stdio=out.stdio), env, cmd)
            except BaseException:
                out.close_unstarted()
                raise
            h.output = out
            return h
        return start

    def env(self, r: int, restarts: int) -> dict:
        """The environment of rank ``r``'s incarnation after ``restarts`` respawns
        (for a remote proc: what goes on top of its agent's environment)."""
        point = Point(r, self.ext)
        n = self.ext.nelements
        remote = self.remote is not None
        env = dict(self.user_env) if remote else dict(self.inherited)
        if remote:            # telemetry's switch reaches remote procs too (not agents' env)
            env.update({k: self.inherited[k] for k in _TELEMETRY_VARS if k in self.inherited})
        env.update(torchrun_env(r, n, self.per, *self.master, run_id=self.run_id,
                                restart_count=restarts, max_restarts=self.max_restarts))
        cmd = self.cmds[r]
        own_devices = cmd is not None and any(v in cmd.env for v in _DEVICE_VARS)
        if "gpus" in point and self.pin and not own_devices:
            if remote:                # the agent maps it onto the GPUs it was given
                env["MONARCH_CY_GPU_COORD"] = str(point["gpus"])
            else:
                env.update(assignment(self.inherited, point["gpus"]))
        if cmd is not None:
            env.update(cmd.env)
        env["MONARCH_CY_RANK"] = str(r)
        env["MONARCH_CY_WORLD_SIZE"] = str(n)
        return env
