"""Host meshes: where procs start, and ``spawn_procs`` that starts them.

``this_host().spawn_procs(per_host={"gpus": 4})`` starts one process per point of
``per_host`` *now* (the bootstrap of :mod:`monarch_cy._actor.bootstrap`, through the fork server of
:mod:`monarch_cy._actor.launch.launcher` or a fresh interpreter) and returns a :class:`ProcMesh` at once;
messages to a proc queue until it is up.  A host mesh of remote hosts (from
``attach_to_workers`` or a job type) has a ``hosts`` dimension and their agents start
the procs (:mod:`monarch_cy._hosts`).  Each proc's exit is armed on the controller's
pump as soon as it is started, so one that dies before it ever answered still fails
its pending calls.
"""

from __future__ import annotations

import os
import sys

from monarch_cy import _config
from monarch_cy._checks import check_timeout
from monarch_cy._actor.base import state as _state
from monarch_cy._actor.base.addresses import alloc_addr
from monarch_cy._actor.base.future import Future
from monarch_cy._actor.base.shape import Extent, MeshTrait, Shape
from monarch_cy._actor.meshes import host_refs, spawn_hooks
from monarch_cy._actor.meshes.controllers import cc_address
from monarch_cy._actor.meshes.proc_mesh import ProcMesh
from monarch_cy._actor.meshes.proc_state import _Proc, _State
from monarch_cy._actor.meshes.restart_policy import RestartPolicy
from monarch_cy._transport.current import current_node

__all__ = ["HostMesh", "this_host"]


def _stopped_and_gone(pm) -> bool:
    """Whether the proc mesh ``pm`` was stopped and every proc of it has exited."""
    fut = pm._state.stop_future
    return fut is not None and fut.done()


class _HostRecord:
    """What an owned host mesh and its slices share: the proc meshes spawned from
    them (for ``stop``/``shutdown``), whether it was shut down, and the Future of its
    hosts being up (``attach_to_workers`` sets it; None: up already)."""

    __slots__ = ("meshes", "down", "ready")

    def __init__(self) -> None:
        self.meshes = []
        self.down = False
        self.ready = None


class HostMesh(MeshTrait):
    """Hosts to start procs on; ``this_host()`` is the controller's host, and
    ``attach_to_workers``/job types give meshes of remote hosts (``hosts``
    dimension; their agents start the procs, see :mod:`monarch_cy._hosts`).

    The mesh a program made (``this_host()`` in the controller, a job's or
    ``attach_to_workers``' hosts) *owns* its hosts: ``stop()`` and ``shutdown()``
    work on it.  A slice of it, or one received from another process (or unpickled
    anywhere), is a *reference*, and they raise ``RuntimeError`` there, as in
    Monarch.  Two host meshes are equal when they name the same hosts (the same
    links in the controller, or this host) with the same shape and bootstrap command.
    """

    def __init__(self, shape: Shape, hosts=None, *, _record=None, _owned=True,
                 _bootstrap=None) -> None:
        self._shape = shape
        # None (this host), monarch_cy._hosts.attach.HostSet, or host_refs.HostRef
        self._hosts = hosts
        self._record = _record if _record is not None else _HostRecord()
        self._owned = _owned
        self._bootstrap = _bootstrap     # with_python_executable's BootstrapCommand
        self._native = None              # the view _inner_host_mesh gives (cached)
        if hosts is not None and hasattr(hosts, "hosts"):
            host_refs.register(hosts)

    def _new_with_shape(self, shape):
        shape = getattr(shape, "_s", shape)        # Monarch's native Shape wraps ours
        out = HostMesh(shape, self._hosts, _record=self._record, _owned=False,
                       _bootstrap=self._bootstrap)
        parent = self._native
        if parent is not None and parent.poll() is None:   # a pending handle assigned
            out._native = host_refs.Derived(parent, shape)
        return out

    def _live(self) -> "_HostRecord":
        rec = self._record
        if rec.down:
            raise RuntimeError("HostMesh has already been shut down")
        return rec

    # -- Monarch's attributes --------------------------------------------------
    @property
    def stream_logs(self) -> bool:
        """False: procs' output reaches the client through the log sink, not a
        per-mesh stream (Monarch's job-made host meshes say the same)."""
        return False

    @property
    def is_fake_in_process(self) -> bool:
        """False: every host mesh here starts real OS processes."""
        return False

    @property
    def region(self) -> host_refs.Region:
        """The mesh's labels and ranks (Monarch's ``Region``)."""
        return host_refs.Region(self._shape)

    @property
    def _inner_host_mesh(self):
        """Monarch's native handle: a resolved view of this mesh (its ``region``), the
        same object each time; None once the mesh was shut down."""
        if self._record.down:
            return None
        if self._native is None:
            self._native = host_refs.Resolved(host_refs.NativeMesh(self._shape))
        return self._native

    @_inner_host_mesh.setter
    def _inner_host_mesh(self, value) -> None:
        self._native = value

    @property
    def _hy_host_mesh(self):
        inner = self._inner_host_mesh
        if inner is None:
            raise RuntimeError("HostMesh has already been shut down")
        return inner

    def with_python_executable(self, python_executable: str) -> "HostMesh":
        """A host mesh over the same hosts whose procs start with
        ``python_executable`` (a Python, or a wrapper that ``exec``s one) running
        monarch_cy's bootstrap; procs spawned from it keep that executable for their
        own ``this_host().spawn_procs()``.  A reference: stop/shutdown the mesh you
        made.  ``spawn_procs(bootstrap_command=...)`` still wins.  On remote hosts
        only the default executable is possible (their agent forks every proc), so
        their ``spawn_procs`` then raises ``ValueError``."""
        from monarch_cy._actor.launch.bootstrap_command import (  # deferred: import time
            BootstrapCommand, default_bootstrap_cmd)
        if not isinstance(python_executable, (str, os.PathLike)) or \
                not os.fspath(python_executable):
            raise TypeError(f"python_executable must be a path, not {python_executable!r}")
        base = default_bootstrap_cmd()
        cmd = BootstrapCommand(os.fspath(python_executable), None, base.args, base.env)
        return HostMesh(self._shape, self._hosts, _record=self._record, _owned=False,
                        _bootstrap=cmd)

    def _host_key(self):
        h = self._hosts
        return None if h is None else h.uid

    def __eq__(self, other) -> bool:
        return (isinstance(other, HostMesh) and self._host_key() == other._host_key()
                and self._shape == other._shape and self._bootstrap == other._bootstrap)

    def __hash__(self) -> int:
        return hash((self._host_key(), self._shape.offset, self._shape.sizes))

    @property
    def initialized(self) -> Future:
        """A Future of ``True`` once the hosts are usable (at once for this host;
        for attached hosts when their agents answered; spawn_procs waits for them
        itself).  ``RuntimeError`` once the mesh was shut down."""
        ready = self._live().ready
        return ready if ready is not None else Future._resolved(True)

    def _stop_all(self, what: str, down: bool) -> Future:
        if not self._owned or (self._hosts is None and not _state.get_node().is_controller):
            # Monarch's text: a slice, or one unpickled or received from another
            # process, is a reference; call it on the host mesh the program made
            raise RuntimeError(f"cannot {what} `HostMesh` that is a reference instead "
                               "of owned")
        rec = self._live()
        meshes, rec.meshes = rec.meshes, []
        if down:
            rec.down = True
        out = Future._make(None)
        left = [len(meshes)]
        errors = []
        hosts = self._hosts if down else None

        def finish():
            if hosts is not None:
                hosts.shut_down()            # their agents exit, as Monarch's workers
            out._set_exception(errors[0]) if errors else out._set_result(None)
        if not meshes:
            finish()
            return out

        def one(f):
            exc = f.exception()
            if exc is not None:
                errors.append(exc)
            left[0] -= 1
            if left[0] == 0:
                finish()
        for pm in meshes:
            try:
                fut = pm.stop()
            except Exception as e:  # noqa: BLE001 - the Future carries it
                fut = Future._resolved(exc=e)
            fut._then(one)
        return out

    def _abandon(self) -> None:
        """The job under this mesh is being killed: stop its proc meshes without
        waiting (their procs' end is then on purpose, not a failure) and mark it
        shut down.  Never raises; nothing for this host (a ``LocalJob``'s meshes)."""
        if self._hosts is None:
            return
        rec = self._record
        meshes, rec.meshes, rec.down = rec.meshes, [], True
        for pm in meshes:
            try:
                pm.stop()
            except Exception:  # noqa: BLE001 - best effort: the hosts go anyway
                pass

    def stop(self) -> Future:
        """Stop every proc mesh spawned from this host mesh (and its slices), and only
        those (another host mesh over the same hosts keeps its procs); a Future of
        None resolved once all have exited.  The hosts stay usable: later
        ``spawn_procs`` work.  ``RuntimeError`` on a reference."""
        return self._stop_all("stop", down=False)

    def shutdown(self) -> Future:
        """As :meth:`stop`, and the host mesh becomes unusable: ``spawn_procs`` and
        ``initialized`` then raise ``RuntimeError("HostMesh has already been shut
        down")`` (``this_host()`` then gives a fresh one).  Remote hosts' agents
        (worker loops) exit once the procs are gone, as Monarch's workers do: another
        host mesh over them loses them.  ``RuntimeError`` on a reference or a mesh
        already shut down."""
        return self._stop_all("shut down", down=True)

    async def __aenter__(self) -> "HostMesh":
        self._live()
        return self

    async def __aexit__(self, *exc) -> None:
        if not self._record.down:
            await self.shutdown()

    def __reduce__(self):
        return (_rebuild_host_mesh, (_state.job_tag(), self._host_key(), self._shape,
                                     self._bootstrap))

    def spawn_procs(self, per_host: dict | None = None, bootstrap=None,
                    name: str = "procs", proc_bind=None, bootstrap_command=None, *,
                    env: dict | None = None, restart=None,
                    heartbeat_timeout: float | None = None) -> ProcMesh:
        """Start ``prod(per_host.values())`` procs per host; returns at once.

        Monarch's parameters, in Monarch's order:

        * ``bootstrap``: a callable (``def`` or ``async def``, no arguments) run in
          every proc before any actor of it is constructed, again in each respawned
          proc (see :mod:`monarch_cy._actor.host.proc_setup`); ``ProcMesh.initialized`` waits for it;
        * ``name``: the mesh's name in logs and errors;
        * ``proc_bind``: one dict per proc of a host (``cpus``/``physcpubind``,
          ``cpunodebind``, ``membind``; see :mod:`monarch_cy._actor.launch.proc_bind`);
        * ``bootstrap_command``: a :class:`BootstrapCommand` or ``point ->
          BootstrapCommand``: the program and extra environment of each proc (see
          :mod:`monarch_cy._actor.launch.bootstrap_command`).

        Each proc's environment (see :mod:`monarch_cy._actor.launch.proc_start` for the order): what this
        process has plus ``env``; the torchrun variables (``RANK``, ``LOCAL_RANK``,
        ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, ...); with a ``gpus``
        dimension, ``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES`` naming the
        device its gpu coordinate indexes among those this process was given
        (``CUDA_VISIBLE_DEVICES``, ``HIP_...``, ``ROCR_...`` or SLURM's
        ``SLURM_STEP_GPUS``/``SLURM_JOB_GPUS``; see :mod:`monarch_cy._actor.launch.visible_gpus`: asking for
        more than were given raises ``ValueError``); the command's ``env``; and
        ``MONARCH_CY_RANK``/``MONARCH_CY_WORLD_SIZE``.  Under
        :mod:`monarch_cy.compat` the gpu coordinate is not pinned, as in Monarch
        (every proc sees the GPUs its parent sees), unless
        ``MONARCH_CY_PIN_GPUS=1``; ``MONARCH_CY_PIN_GPUS=0`` turns pinning off here.

        ``restart``: a :class:`RestartPolicy` to respawn failed ranks automatically.
        ``heartbeat_timeout``: seconds without a heartbeat answer before a proc is
        failed and killed (default ``MONARCH_CY_HEARTBEAT_TIMEOUT`` or 10; 0: off).
        """
        rec = self._live()
        pm = self._spawn_procs(per_host, bootstrap, name, proc_bind, bootstrap_command,
                               env=env, restart=restart, heartbeat_timeout=heartbeat_timeout)
        # stop()/shutdown() stop it; meshes already stopped (every proc exited) are
        # dropped here, so a long-lived host mesh does not keep one per spawn
        rec.meshes = [m for m in rec.meshes if not _stopped_and_gone(m)]
        rec.meshes.append(pm)
        return spawn_hooks.announce(pm)

    def _spawn_procs(self, per_host, bootstrap, name, proc_bind, bootstrap_command, *,
                     env, restart, heartbeat_timeout) -> ProcMesh:
        if self._hosts is None and bootstrap_command is None and self._bootstrap is None:
            made = current_node()            # None: no node yet, so ours (a controller)
            if made is None or made.is_controller:
                # deferred: import time (the launcher loads when procs first start)
                from monarch_cy._actor.launch.launcher import prestart
                prestart()   # the fork server boots while this process makes its node
        node = _state.get_node()
        # deferred: import time (launching and supervising load when procs first start)
        from monarch_cy._actor.host import proc_setup
        from monarch_cy._actor.launch import proc_bind as binding
        from monarch_cy._actor.launch.launcher import arm_exit
        from monarch_cy._actor.launch.proc_start import ProcStarts
        from monarch_cy._actor.launch.visible_gpus import check_enough
        from monarch_cy._actor.meshes import heartbeat
        from monarch_cy._actor.meshes.failures import on_exit, on_silent
        from monarch_cy._actor.meshes.remote_ops import spawn_procs_remote
        # the procs start with this process's monarch.config (as Monarch's)
        from monarch_cy._config_api import child_environment  # deferred: import time
        if env is not None and not all(isinstance(k, str) and isinstance(v, str)
                                       for k, v in env.items()):
            raise TypeError(f"env must map str to str, not {env!r}")
        env = {**child_environment(), **(env or {})} or None
        if not node.is_controller and (self._hosts is None or
                                       isinstance(self._hosts, host_refs.HostRef)):
            # the client starts them (it holds the fork server and the agents' links)
            return spawn_procs_remote(self._shape, dict(
                per_host=per_host, bootstrap=bootstrap, name=name, proc_bind=proc_bind,
                bootstrap_command=bootstrap_command, env=env, restart=restart,
                heartbeat_timeout=heartbeat_timeout,
                _host=(self._host_key(), self._bootstrap)))
        if bootstrap_command is None:
            bootstrap_command = self._bootstrap
        if restart is not None and not isinstance(restart, RestartPolicy):
            raise TypeError(f"restart must be a RestartPolicy or None, not {restart!r}")
        if heartbeat_timeout is None:
            heartbeat_timeout = heartbeat.default_timeout()
        else:
            heartbeat_timeout = check_timeout("heartbeat_timeout", heartbeat_timeout,
                                              allow_zero=True)
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty str, not {name!r}")
        per_host = dict(per_host or {})
        for k, v in per_host.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"per_host[{k!r}] must be a positive int, not {v!r}")
        setup = proc_setup.check(bootstrap)
        per = 1
        for v in per_host.values():
            per *= v
        binds = binding.check(proc_bind, per)
        pin = _pin_gpus()
        if pin and "gpus" in per_host and self._hosts is None:
            check_enough({**os.environ, **(env or {})}, per_host["gpus"])
        labels = self._shape.labels + tuple(per_host)
        sizes = self._shape.sizes + tuple(per_host.values())
        ext = Extent(labels, sizes)
        cfg = {"secret": node.keys.secret.hex(), "controller": node.addr,
               "controller_pid": os.getpid(), "rundir": node.rundir,
               "sys_path": [p for p in sys.path if isinstance(p, str)],
               "compat": _compat_installed(), "cc_addr": cc_address(node),
               "setup": setup is not None}
        mid = _state.next_id()
        starts = ProcStarts(node, ext, per, mesh_id=mid,
                            inherited={**os.environ, **(env or {})}, user_env=dict(env or {}),
                            pin=pin, remote=self._hosts, bootstrap_command=bootstrap_command,
                            cfg=dict(cfg, mesh_id=mid),
                            max_restarts=restart.max_restarts if restart else 0,
                            name=str(name))
        remote = None
        granks = self._shape.global_ranks()
        if self._hosts is not None:   # one remote host per point; waits for their agents
            remote = self._hosts.resolve(granks)
        uid = self._host_key()

        def host_of(r):               # the proc's this_host(): its host, 0-dimensional
            return host_refs.describe(uid, Shape((), granks[r // per], (), ()),
                                      self._bootstrap)
        procs = []
        st = _State(mid, procs, str(name), restart)
        _state.STATES.append(st)
        for r in range(ext.nelements):
            if remote is not None:    # the host's agent merges env into its own
                host = remote[r // per]
                key, daddr = host.proc_addrs()
                starter = starts.starter(r, key, daddr, host, binds[r % per], host_of(r))
            else:
                key = alloc_addr(node, f"p{mid}.{r}")
                daddr = alloc_addr(node, f"p{mid}.{r}d")
                starter = starts.starter(r, key, daddr, None, binds[r % per], host_of(r))
            p = _Proc(r, key, starter(), st, starter, daddr)
            p.remote = remote is not None
            procs.append(p)
            _state.LIVE_PROCS[key] = p
            node.call_in_pump(lambda p=p: arm_exit(
                p.popen, lambda code: on_exit(node, p, code)))   # an early exit too
        heartbeat.start(node, st, heartbeat_timeout, lambda p, cause: on_silent(node, p, cause))
        pm = ProcMesh(procs, Shape.dense(labels, sizes), st)
        pm._host_mesh = self          # Monarch's ProcMesh._host_mesh
        if setup is not None:
            st.setup = proc_setup.start(pm, setup)
        return pm

    def __repr__(self):
        return f"<HostMesh {self.sizes!r}>"


def _pin_gpus() -> bool:
    """Whether the ``gpus`` coordinate sets each proc's visible devices (see
    ``HostMesh.spawn_procs``)."""
    pin = _config.pin_gpus()
    return (not _compat_installed()) if pin is None else pin


def _compat_installed() -> bool:
    """Whether ``monarch_cy.compat.install()`` ran here (workers then install it too)."""
    compat = sys.modules.get("monarch_cy.compat")
    return bool(compat is not None and compat.installed())



_this_host = None


def this_host() -> HostMesh:
    """This process's host, as a host mesh with no dimensions: the same object on
    every call (a fresh one after it was shut down).  In the controller it owns the
    host; in a proc it is a reference to the host the proc runs on (a remote host's
    slice of the mesh the proc was spawned from, with that mesh's bootstrap command):
    ``spawn_procs`` there asks the client, ``stop``/``shutdown`` raise."""
    global _this_host
    h = _this_host
    if h is None or h._record.down:
        desc = host_refs.worker_host()
        if desc is None:
            h = HostMesh(Shape.dense((), ()))
        else:
            uid, shape, boot = desc
            h = HostMesh(shape, host_refs.lookup(uid), _owned=False, _bootstrap=boot)
        _this_host = h
    return h


def _rebuild_host_mesh(tag, uid, shape, bootstrap=None):
    """A HostMesh unpickles as a reference: over the controller's links to its hosts
    (``uid``; elsewhere a reference the controller resolves), or, for this host
    (``uid`` None), "this host" of the receiver (the procs of a job on one machine
    share it)."""
    _state.check_job(tag, "host mesh")
    return HostMesh(shape, host_refs.lookup(uid), _owned=False, _bootstrap=bootstrap)
