"""SPMD jobs (Monarch's ``monarch.job.spmd``): ``serve``, ``SPMDJob``, ``StoreJob``.

* ``serve(command, scheduler="local_cwd")``: a single-node torchrun command
  (``["torchrun", "--nproc-per-node=4", "--standalone", "train.py", ...]``, or
  ``python [-m torch.distributed.run ...] script``) as an :class:`SPMDJob` whose
  mesh ``workers`` is this host (what Monarch's ``SPMDJob`` returns for a
  ``local*`` scheduler); ``job.run_spmd()`` starts ``--nproc-per-node`` procs and
  runs the script in each with torchrun's variables (:class:`monarch_cy.spmd.SPMDActor`).
  A multi-node command (``--nnodes`` other than 1) raises ``ValueError`` as in
  Monarch; a torchx ``AppDef`` or another scheduler (``mast*``, ``slurm``, ...)
  raises ``NotImplementedError``: they need torchx's schedulers, which monarch_cy
  does not drive (an ``SPMDJob`` of such a scheduler can be made, as Monarch's
  cache makes one, but asking for its ``state()`` raises that error).  As Monarch, ``serve`` removes a stale ``.monarch/job_state.pkl``
  in the working directory (with a warning).
* ``StoreJob.from_store(store, ...)``, called on every rank of a torchrun-style job:
  each local rank 0 starts one worker process (a host agent, ending with that rank)
  and publishes its address in ``store`` (any object with ``set(key, value)`` and a
  blocking ``get(key) -> bytes``, e.g. a ``torch.distributed.TCPStore``); global
  rank 0 gets a ``StoreJob`` over every worker, the other ranks None.
  ``transport="ipc"`` (Monarch's default; one machine) listens on loopback,
  ``"tcp"`` on this host's address at ``monarch_port`` (required, not 0, as in
  Monarch).  The workers hold the job secret from ``MONARCH_CY_JOB_SECRET[_FILE]``
  (every rank's environment); on a single node without one, rank 0 makes one.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import warnings

from monarch_cy._hosts import job_cache
from monarch_cy._hosts.job import JobState, JobTrait

__all__ = ["serve", "SPMDJob", "StoreJob", "parse_torchrun"]


def _torchrun_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    for names, kw in [
        (("--nnodes",), {"default": "1:1"}),
        (("--nproc-per-node", "--nproc_per_node"), {"default": "1"}),
        (("--rdzv-backend", "--rdzv_backend"), {}), (("--rdzv-endpoint", "--rdzv_endpoint"), {}),
        (("--rdzv-id", "--rdzv_id"), {}), (("--rdzv-conf", "--rdzv_conf"), {}),
        (("--max-restarts", "--max_restarts"), {}),
        (("--monitor-interval", "--monitor_interval"), {}),
        (("--start-method", "--start_method"), {}), (("--role",), {}),
        (("--log-dir", "--log_dir"), {}), (("-r", "--redirects"), {}), (("-t", "--tee"), {}),
        (("--local-ranks-filter", "--local_ranks_filter"), {}),
        (("--node-rank", "--node_rank"), {}), (("--master-addr", "--master_addr"), {}),
        (("--master-port", "--master_port"), {}), (("--local-addr", "--local_addr"), {}),
    ]:
        p.add_argument(*names, type=str, **kw)
    for names in (("--standalone",), ("-m", "--module"), ("--no-python", "--no_python"),
                  ("--run-path", "--run_path")):
        p.add_argument(*names, action="store_true")
    p.add_argument("training_script", nargs="?")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def parse_torchrun(roles: list) -> tuple[list, int]:
    """``(script_args, nproc_per_node)`` of a torchrun (or python) command, given as
    Monarch's role dicts ``[{"entrypoint": ..., "args": [...]}]``."""
    if not roles:
        raise ValueError("No roles provided")
    if len(roles) > 1:
        raise ValueError("Multiple roles provided. monarch.spmd supports single-role "
                         "SPMD jobs")
    full = list(roles[0].get("args", []))
    entry = roles[0].get("entrypoint", "")
    if entry in ("torchrun", "torch.distributed.run", "python", "python3"):
        full = [entry] + full
    if not full:
        raise ValueError("Role has no args")
    if full[0] in ("torchrun", "torch.distributed.run"):
        rest = full[1:]
    elif full[0] in ("python", "python3"):
        if len(full) >= 3 and full[1] == "-m" and full[2] in ("torch.distributed.run",
                                                              "torchrun"):
            rest = full[3:]
        else:
            return list(full[1:]), 1
    else:
        raise ValueError(f"Expected args to start with torchrun, torch.distributed.run, "
                         f"python, or python3, got: {full[0]}")
    args, _ = _torchrun_parser().parse_known_args(rest)
    try:
        nproc = int(args.nproc_per_node)
    except ValueError:
        warnings.warn(f"--nproc-per-node={args.nproc_per_node} is not an integer, "
                      "defaulting to 1.", stacklevel=2)
        nproc = 1
    script = (["-m"] if args.module else []) + \
        ([args.training_script] if args.training_script else []) + \
        list(args.training_script_args or [])
    return script, nproc


def _check_single_node(command: list) -> None:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--nnodes", type=str, default=None)
    args, _ = p.parse_known_args(command)
    if args.nnodes is not None and args.nnodes.strip() not in ("1", "1:1"):
        raise ValueError(f"Multi-node torchrun commands are not supported with serve(). "
                         f"Got --nnodes={args.nnodes.strip()}. When passing a command "
                         "list, only single-node (--nnodes=1 or --standalone) is valid.")


def serve(appdef, scheduler: str = "mast_conda", scheduler_cfg: dict | None = None):
    """An :class:`SPMDJob` for a single-node torchrun command (module docstring)."""
    if not isinstance(appdef, list):
        raise NotImplementedError(
            f"serve({type(appdef).__name__}): torchx AppDefs need torchx's schedulers, "
            "which monarch_cy does not drive; pass a single-node torchrun command list "
            "with scheduler='local_cwd'")
    if not appdef or not all(isinstance(a, str) for a in appdef):
        raise ValueError(f"command must be a non-empty list of str, not {appdef!r}")
    _check_single_node(appdef)
    if not isinstance(scheduler, str) or not scheduler.startswith("local"):
        raise NotImplementedError(
            f"scheduler {scheduler!r}: monarch_cy runs serve() on this host only "
            "(scheduler='local_cwd'); for a cluster use SlurmJob or KubernetesJob")
    roles = [{"entrypoint": appdef[0], "args": list(appdef[1:])}]
    parse_torchrun(roles)                     # a bad command fails here, not later
    stale = os.path.join(os.getcwd(), ".monarch", "job_state.pkl")
    if os.path.exists(stale):
        warnings.warn(f"Removing stale job state file: {stale}", stacklevel=2)
        os.remove(stale)
    return SPMDJob(handle=f"{scheduler}://monarch_cy/spmd-job", scheduler=scheduler,
                   workspace=os.getcwd(), original_roles=roles)


@job_cache.register
class SPMDJob(JobTrait):
    """An SPMD job on this host (module docstring); ``state().workers``."""

    def __init__(self, handle: str, scheduler: str, workspace: str | None = None,
                 original_roles: list | None = None, service_proc_ids=None) -> None:
        if not isinstance(scheduler, str):
            raise TypeError(f"scheduler must be a str, not {scheduler!r}")
        self._app_handle = handle
        self._scheduler = scheduler
        self._workspace = workspace
        self._original_roles = list(original_roles or [])
        self._service_proc_ids = service_proc_ids

    def _create(self, client_script=None) -> None:
        pass                                   # serve() made the job

    def _state(self) -> JobState:
        # a job of another scheduler is made (and cached) as in Monarch; reaching its
        # workers needs torchx's scheduler, which monarch_cy does not drive
        if not self._scheduler.startswith("local"):
            raise NotImplementedError(f"SPMDJob with scheduler {self._scheduler!r}: only "
                                      "local schedulers run in monarch_cy")
        from monarch_cy._actor.meshes.host_mesh import this_host
        return JobState({"workers": this_host()})

    def can_run(self, spec) -> bool:
        return False

    def _kill(self) -> None:
        pass

    def run_spmd(self):
        """Run the command's script in ``--nproc-per-node`` procs of this host."""
        from monarch_cy._spmd import SPMDActor
        workers = self.state(cached_path=None).workers
        script, nproc = parse_torchrun(self._original_roles)
        procs = workers.spawn_procs(per_host={"gpus": nproc})
        try:
            am = procs.spawn("_SPMDActor", SPMDActor)
            first = am.slice(**{k: 0 for k in procs.extent.keys()})
            addr, port = first.get_host_port.call_one(None).get()
            am.main.call(addr, port, script).get()
        finally:
            procs.stop().get()

    def _cache_state(self) -> dict:
        return {"handle": self._app_handle, "scheduler": self._scheduler,
                "workspace": self._workspace, "original_roles": self._original_roles}

    @classmethod
    def _from_cache(cls, d: dict) -> "SPMDJob":
        job = cls(d["handle"], d["scheduler"], d.get("workspace"), d.get("original_roles"))
        job._status = "running"
        return job


def _env_int(name: str, given):
    if given is not None:
        return int(given)
    v = os.environ.get(name)
    if v is None:
        raise ValueError(f"{name} is not set; pass it to StoreJob.from_store")
    return int(v)


def _start_store_worker(listen: str, secret: bytes, tmpdir: str) -> str:
    from monarch_cy._transport.secret import ENV, ENV_FILE
    addr_file = os.path.join(tmpdir, "worker.addr")
    env = dict(os.environ)
    env.pop(ENV_FILE, None)
    env[ENV] = secret.hex()
    p = subprocess.Popen([sys.executable, "-m", "monarch_cy._hosts.agent", "--listen",
                          listen, "--address-file", addr_file, "--owner-pid",
                          str(os.getpid()), "--log-level", "WARNING"],
                         env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while True:
        if os.path.exists(addr_file):
            with open(addr_file) as f:
                addr = f.read().strip()
            if addr:
                return addr
        if p.poll() is not None:
            raise RuntimeError(f"the store worker exited (status {p.returncode}) before "
                               f"listening on {listen}")
        if time.monotonic() > deadline:
            p.kill()
            raise TimeoutError(f"the store worker did not listen on {listen} in time")
        time.sleep(0.01)


@job_cache.register
class StoreJob(JobTrait):
    """Workers rendezvoused through a store (module docstring); ``state()[name]``."""

    def __init__(self, worker_addrs: list, name: str, secret: bytes | None = None) -> None:
        if isinstance(worker_addrs, str) or not worker_addrs:
            raise ValueError(f"worker_addrs must be a non-empty list of addresses, not "
                             f"{worker_addrs!r}")
        self._worker_addrs = list(worker_addrs)
        self._name = name
        self._secret = secret

    @classmethod
    def from_store(cls, store, *, monarch_port: int = 0, name: str = "monarch_worker",
                   transport: str = "ipc", rank=None, local_rank=None, world_size=None,
                   local_world_size=None):
        """Start this host's worker (local rank 0) and, on global rank 0, return the
        job over every host's worker; None on the other ranks."""
        if transport not in ("ipc", "tcp"):
            raise ValueError(f"transport {transport!r}: monarch_cy supports 'ipc' (one "
                             "machine, over loopback) and 'tcp'")
        if transport == "tcp" and not monarch_port:
            raise ValueError("transport='tcp' needs an explicit non-zero monarch_port")
        rank, local_rank = _env_int("RANK", rank), _env_int("LOCAL_RANK", local_rank)
        world, local_world = (_env_int("WORLD_SIZE", world_size),
                              _env_int("LOCAL_WORLD_SIZE", local_world_size))
        if local_world < 1 or world % local_world:
            raise ValueError(f"WORLD_SIZE={world} is not a multiple of "
                             f"LOCAL_WORLD_SIZE={local_world}")
        nodes, group = world // local_world, rank // local_world
        from monarch_cy._transport.secret import load_secret, new_secret
        try:
            secret = load_secret()
        except ValueError:
            if nodes != 1:
                raise ValueError("StoreJob across several nodes needs the job secret in "
                                 "every rank's environment (MONARCH_CY_JOB_SECRET or "
                                 "MONARCH_CY_JOB_SECRET_FILE)") from None
            secret = new_secret()
        if local_rank == 0:
            if transport == "ipc":
                listen = "tcp://127.0.0.1:0"
            else:
                from monarch_cy._hosts import protocol as P
                listen = f"tcp://{P.resolve(socket.getfqdn())}:{monarch_port}"
            addr = _start_store_worker(listen, secret,
                                       tempfile.mkdtemp(prefix="monarch_cy_store_"))
            store.set(f"{name}/worker/{group}", addr.encode())
        if rank != 0:
            return None
        addrs = []
        for g in range(nodes):
            v = store.get(f"{name}/worker/{g}")
            addrs.append(v.decode() if isinstance(v, (bytes, bytearray)) else str(v))
        return cls(addrs, name, secret)

    def state(self, cached_path: str | None = None) -> JobState:
        """Attach to the workers (no cache by default, as Monarch)."""
        return super().state(cached_path)

    def _create(self, client_script=None) -> None:
        pass

    def _state(self) -> JobState:
        from monarch_cy._hosts.attach import attach_to_workers
        return JobState({self._name: attach_to_workers(
            workers=self._worker_addrs, name=self._name, ca="trust_all_connections",
            secret=self._secret)})

    def can_run(self, spec) -> bool:
        return False

    def _kill(self) -> None:
        pass                       # the ranks that started the workers own them

    def _cache_state(self) -> dict:
        return {"worker_addrs": self._worker_addrs, "name": self._name,
                "secret": self._secret.hex() if self._secret else None}

    @classmethod
    def _from_cache(cls, d: dict) -> "StoreJob":
        s = d.get("secret")
        return cls(d["worker_addrs"], d["name"], bytes.fromhex(s) if s else None)
