"""Jobs on this machine: ``ProcessJob``, ``LocalJob`` (and its batch wrapper) and
``hosts_from_config`` (Monarch's ``monarch.job`` names).

``ProcessJob({"trainers": 2, "dataloaders": 1}, env=None)``: each host is a worker
process this job starts on this machine: a monarch_cy host agent (the same one
``attach_to_workers`` attaches to) listening on a free loopback port, holding the
controller's job secret, its procs binding a port range of their own.
``state()`` attaches to them and returns their ``HostMesh``es.  Lifetimes:

* Until the job is cached (``state(cached_path=...)``, ``dump``, ``dumps``), the
  agents end with the controller: ``kill()``, the controller's exit, or its death
  (each agent watches its parent).
* Once cached, they outlive it (as Monarch's workers do): a later controller
  re-attaches with ``state(cached_path=...)`` (or ``job_load(path).state()``), and
  any of them ends the job with ``kill()``.  An agent that loses its controller
  kills that controller's procs and waits for the next one.

``kill()`` stops every agent (``SIGTERM``, whose handler kills its procs; ``SIGKILL``
after a grace period), checking first that each pid still runs this job's agent.
A malformed specification raises ``TypeError`` / ``ValueError`` naming the value
before anything starts; a failure while starting ends what was started.

``LocalJob(hosts=("hosts",))``: as in Monarch, every mesh is ``this_host()``;
``apply(client_script=PATH)`` writes a batch job to ``DEFAULT_JOB_PATH`` and runs
``python PATH`` in the background (logs under ``.monarch/logs/``) with
``MONARCH_BATCH_JOB=1``, so that the script's own ``LocalJob().state()`` loads it.

``hosts_from_config(name)``: a ``HostMesh`` of two worker processes on this machine
(Monarch 0.7.0 hard-codes two), ending with the controller.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from monarch_cy._checks import is_int
from monarch_cy._hosts import job_cache
from monarch_cy._hosts.job import (DEFAULT_JOB_PATH, JobState, JobTrait, ProcessState,
                                   split_meshes)

__all__ = ["ProcessJob", "LocalJob", "BatchJob", "hosts_from_config",
           "MONARCH_BATCH_JOB_ENV", "in_batch_job", "check_process_meshes"]

MONARCH_BATCH_JOB_ENV = "MONARCH_BATCH_JOB"
_PORTS_PER_HOST = 100           # proc ports each agent may hand out
_GRACE_S = 3.0                  # SIGTERM -> SIGKILL


def in_batch_job() -> bool:
    """True in the client script a batch job started."""
    return os.environ.get(MONARCH_BATCH_JOB_ENV) == "1"


def _check_name(k) -> None:
    if not isinstance(k, str):
        raise TypeError(f"mesh name {k!r} must be a str")
    if not k.isidentifier() or k.startswith("_"):
        raise ValueError(f"mesh name {k!r} must be a Python identifier not starting "
                         "with '_' (it becomes an attribute of the job's state)")


def check_process_meshes(meshes) -> dict:
    """``meshes`` checked: a non-empty dict of mesh name -> number of hosts (>= 1)."""
    if not isinstance(meshes, dict):
        raise TypeError(f"meshes must be a dict of mesh name -> number of hosts, "
                        f"e.g. {{'hosts': 2}}, not {meshes!r}")
    if not meshes:
        raise ValueError("meshes is empty; ask for at least one mesh, e.g. {'hosts': 1}")
    for k, v in meshes.items():
        _check_name(k)
        if not is_int(v):
            raise TypeError(f"meshes[{k!r}] must be an int number of hosts, not {v!r}")
        if v < 1:
            raise ValueError(f"meshes[{k!r}] must be at least 1 host, not {v!r}")
    return dict(meshes)


def _check_env(env) -> dict | None:
    if env is None:
        return None
    if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise TypeError(f"env must be a dict of str -> str, not {env!r}")
    bad = [k for k in env if not k or "=" in k or "\0" in k]
    if bad:
        raise ValueError(f"env has invalid variable names {bad!r}")
    return dict(env)


# -- processes ------------------------------------------------------------------------

def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _is_ours(w: dict) -> bool:
    """Whether ``w["pid"]`` still runs this job's agent (not a reused pid)."""
    try:
        os.kill(w["pid"], 0)
    except OSError:
        return False
    cmd = _cmdline(w["pid"])
    if not cmd:                          # no /proc: trust the pid
        return True
    return w["tag"].encode() in cmd.split(b"\0")


def _alive_in_sessions(sids: set) -> list:
    """Live pids (not zombies) whose session id is in ``sids``."""
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    me = os.getpid()
    for e in entries:
        if not e.isdigit() or int(e) == me:
            continue
        pid = int(e)
        try:
            if os.getsid(pid) not in sids:
                continue
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X", "x"):
                    continue
        except OSError:
            continue
        out.append(pid)
    return out


def _terminate(workers: list, popens: dict) -> None:
    """SIGTERM this job's live agents, wait, SIGKILL what is left of their sessions."""
    ours = [w["pid"] for w in workers if _is_ours(w)]
    sids = set(ours)
    for pid in ours:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass

    def alive():
        left = []
        for pid in ours:
            p = popens.get(pid)
            if p is not None:
                if p.poll() is None:
                    left.append(pid)
            elif os.path.exists(f"/proc/{pid}") and _cmdline(pid):
                left.append(pid)
        return left
    deadline = time.monotonic() + _GRACE_S
    while alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in set(alive()) | set(_alive_in_sessions(sids)):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for p in popens.values():
        try:
            p.wait(5)
        except Exception:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _reap_sessions(pids: list) -> None:
    """End the sessions of ``pids`` (workers started with ``start_new_session``, and
    every proc they started, which stay in those sessions in groups of their own):
    SIGTERM, a grace period, SIGKILL; without ``/proc`` only the pids' groups."""
    sids = set(pids)

    def live():
        if os.path.isdir("/proc"):
            return _alive_in_sessions(sids)
        return [p for p in pids if _alive(p)]

    def signal_all(sig):
        for pid in live():
            try:
                os.killpg(pid, sig)
            except OSError:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
    signal_all(signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_S
    while live() and time.monotonic() < deadline:
        time.sleep(0.02)
    signal_all(signal.SIGKILL)
    deadline = time.monotonic() + 2.0          # reaped by their parents, or by init
    while live() and time.monotonic() < deadline:
        time.sleep(0.02)


def _ephemeral() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999                       # Linux's default


def _port_ranges(n: int) -> list:
    """``n`` disjoint proc port ranges, clear of the agents' default range and of the
    ports the kernel hands to outgoing connections (the many connections between
    procs would otherwise take a port a proc is about to bind)."""
    width = _PORTS_PER_HOST
    need = n * width
    lo, hi = _ephemeral()
    windows = [(w0, w1) for w0, w1 in ((27601, lo - 1), (hi + 1, 65535), (10000, 26600))
               if w1 - w0 + 1 >= need]
    w0, w1 = windows[0] if windows else (10000, 65535)
    base = random.randrange(w0, max(w0 + 1, w1 + 2 - need))
    return [(base + i * width, base + (i + 1) * width - 1) for i in range(n)]


def _log_tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            tail = f.read()[-1500:].strip()
    except OSError:
        return ""
    return f"; its output ({path}):\n{tail}" if tail else ""


@job_cache.register
class ProcessJob(JobTrait):
    """Hosts as worker processes on this machine (module docstring).

    ``meshes``: mesh name -> number of hosts; ``env``: extra environment variables
    for the worker processes (and the procs they start)."""

    _workers = None          # [{"mesh", "rank", "pid", "addr", "tag", "log"}]
    _secret = None           # hex: the secret the agents' links use
    _tmpdir = None           # the job's folder (address files, agent logs)
    _detached = False        # cached: the agents outlive this controller
    _popens = None

    def __init__(self, meshes: dict, env: dict | None = None) -> None:
        self._meshes = check_process_meshes(meshes)
        self._env = _check_env(env)
        # Monarch's view of the workers, host key ("trainers_0") -> ProcessState(pid,
        # address).  A subclass whose _create starts workers itself (Monarch's way:
        # run_worker_loop_forever at an ipc:// or tcp:// address) fills it, and
        # _state attaches to those addresses.
        self._host_to_pid = {}

    def __repr__(self):
        return f"ProcessJob({self._meshes!r}{'' if self._env is None else ', env=...'})"

    # -- JobTrait ----------------------------------------------------------------
    def _create(self, client_script) -> None:
        if client_script is not None:
            raise RuntimeError("ProcessJob cannot run batch-mode scripts "
                               f"(client_script={client_script!r})")
        from monarch_cy._hosts.attach import (at_shutdown, attach_timeout,
                                               ensure_controller_node)
        from monarch_cy._transport.secret import ENV, ENV_FILE
        node = ensure_controller_node("127.0.0.1", None)
        self._secret = node.keys.secret.hex()
        self._tmpdir = tempfile.mkdtemp(prefix="monarch_cy_process_job_")
        self._workers, self._popens, self._detached = [], {}, False
        env = dict(os.environ)
        env.update(self._env or {})
        env.pop(ENV_FILE, None)
        env[ENV] = self._secret
        total = sum(self._meshes.values())
        ranges = iter(_port_ranges(total))
        try:
            for mesh, count in self._meshes.items():
                for i in range(count):
                    self._start_worker(mesh, i, next(ranges), env)
            deadline = time.monotonic() + attach_timeout()
            for w in self._workers:
                w["addr"] = self._wait_address(w, deadline)
                self._host_to_pid[f"{w['mesh']}_{w['rank']}"] = ProcessState(
                    w["pid"], w["addr"])
        except BaseException:
            self._stop()
            raise
        at_shutdown(self._end_if_owned)

    def _start_worker(self, mesh: str, rank: int, ports, env: dict) -> None:
        key = f"{mesh}_{rank}"
        addr_file = os.path.join(self._tmpdir, f"{key}.addr")
        log = os.path.join(self._tmpdir, f"{key}.log")
        with open(log, "wb") as out:
            p = subprocess.Popen(
                [sys.executable, "-m", "monarch_cy._hosts.agent",
                 "--listen", "tcp://127.0.0.1:0", "--address-file", addr_file,
                 "--ports", f"{ports[0]}-{ports[1]}", "--owner-pid", str(os.getpid()),
                 "--log-level", "WARNING"],
                env=dict(env, MONARCH_CY_AGENT_RANK=str(rank)), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                cwd=os.getcwd())
        self._popens[p.pid] = p
        self._workers.append({"mesh": mesh, "rank": rank, "pid": p.pid, "addr": None,
                              "tag": addr_file, "log": log})

    def _wait_address(self, w: dict, deadline: float) -> str:
        p = self._popens[w["pid"]]
        while True:
            try:
                with open(w["tag"]) as f:
                    addr = f.read().strip()
                if addr:
                    return addr
            except FileNotFoundError:
                pass
            if p.poll() is not None:
                raise RuntimeError(f"ProcessJob: the worker for {w['mesh']}[{w['rank']}] "
                                   f"exited (status {p.returncode}) before listening"
                                   f"{_log_tail(w['log'])}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"ProcessJob: the worker for {w['mesh']}[{w['rank']}] "
                                   f"did not start listening in time{_log_tail(w['log'])}")
            time.sleep(0.01)

    def _state(self) -> JobState:
        if self._workers is None:
            return self._attach_started()
        from monarch_cy._hosts.attach import attach_timeout, ensure_controller_node, get_hub
        dead = [f"{w['mesh']}[{w['rank']}] (pid {w['pid']})" for w in self._workers
                if not _is_ours(w)]
        if dead:
            raise RuntimeError(f"ProcessJob: lost worker processes {', '.join(dead)}; "
                               "kill() this job and start a new one")
        from monarch_cy._transport.auth import JobKeys
        node = ensure_controller_node("127.0.0.1", None)
        hub = get_hub(node)
        t = attach_timeout()
        keys = JobKeys(bytes.fromhex(self._secret))     # the agents' (a cached job's)
        hosts = [hub.connect(w["addr"], t, keys) for w in self._workers]
        for w, h in zip(self._workers, hosts):
            h.ready.wait(t + 5.0)
            if h.state != "up":
                err = h.error or RuntimeError(f"{h.name} is not up ({h.state})")
                raise type(err)(f"{err}{_log_tail(w['log'])}") from None
        return split_meshes(self._meshes, hosts)

    def _attach_started(self) -> JobState:
        """The meshes over workers a subclass's ``_create`` started itself."""
        from monarch_cy._hosts.attach import attach_to_workers
        if not self._pids_active():
            raise RuntimeError("ProcessJob: lost connection to its worker processes "
                               f"({self._host_to_pid!r})")
        return JobState({
            mesh: attach_to_workers(name=mesh, ca="trust_all_connections", workers=[
                self._host_to_pid[f"{mesh}_{i}"].channel for i in range(count)])
            for mesh, count in self._meshes.items()})

    def can_run(self, spec) -> bool:
        """A running ``ProcessJob`` with the same meshes whose workers all live."""
        return (isinstance(spec, ProcessJob) and spec._meshes == self._meshes
                and self._pids_active())

    def _pids_active(self) -> bool:
        if not self.active:
            return False
        if self._workers is not None:
            return bool(self._workers) and all(_is_ours(w) for w in self._workers)
        return bool(self._host_to_pid) and all(
            _alive(p.pid) for p in self._host_to_pid.values())

    def _kill(self) -> None:
        self._stop()

    def _stop(self) -> None:
        workers, popens = self._workers or [], self._popens or {}
        self._workers, self._popens = None, None
        ours = {w["pid"] for w in workers}
        others = [p.pid for p in self._host_to_pid.values() if p.pid not in ours]
        self._host_to_pid = {}
        _terminate(workers, popens)
        if others:                  # workers a subclass started: their whole sessions
            _reap_sessions(others)
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __getstate__(self) -> dict:
        # a subclass pickled whole (a job type of the program's own): no Popen objects
        state = super().__getstate__()
        state.pop("_popens", None)
        return state

    def _end_if_owned(self) -> None:
        if not self._detached and self._workers:
            self._status = "not_running"
            self._stop()

    # -- cache -------------------------------------------------------------------
    def _cache_state(self) -> dict:
        running = None
        if self._status == "running" and self._workers:
            running = {"workers": [dict(w) for w in self._workers],
                       "secret": self._secret, "dir": self._tmpdir}
        return {"meshes": self._meshes, "env": self._env, "running": running}

    def _on_dumped(self) -> None:
        if self._detached or not self._workers:
            return
        self._detached = True
        for w in self._workers:
            if _is_ours(w):
                os.kill(w["pid"], signal.SIGUSR1)      # stop watching this controller

    @classmethod
    def _from_cache(cls, d: dict) -> "ProcessJob":
        job = cls(d["meshes"], d.get("env"))
        r = d.get("running")
        if r is not None:
            workers = [{k: w[k] for k in ("mesh", "rank", "pid", "addr", "tag", "log")}
                       for w in r["workers"]]
            for w in workers:
                if not is_int(w["pid"]) or not isinstance(w["addr"], str):
                    raise ValueError(f"bad worker entry {w!r}")
            bytes.fromhex(r["secret"])
            job._workers, job._secret, job._tmpdir = workers, r["secret"], r.get("dir")
            job._popens, job._detached, job._status = {}, True, "running"
            job._host_to_pid = {f"{w['mesh']}_{w['rank']}": ProcessState(w["pid"], w["addr"])
                                for w in workers}
        return job


@job_cache.register
class LocalJob(JobTrait):
    """Every mesh is this host (``this_host()``); see the module docstring."""

    _proc = None
    _log_dir = None

    def __init__(self, hosts=("hosts",)) -> None:
        if isinstance(hosts, (str, bytes)) or not hasattr(hosts, "__iter__"):
            raise TypeError(f"hosts must be a sequence of mesh names, e.g. "
                            f"('trainers',), not {hosts!r}")
        hosts = tuple(hosts)
        if not hosts:
            raise ValueError("hosts is empty; name at least one mesh")
        for h in hosts:
            _check_name(h)
        self._host_names = hosts

    def __repr__(self):
        return f"LocalJob(hosts={self._host_names!r})"

    def _create(self, client_script) -> None:
        if client_script is None:
            return                        # this host always exists
        if not isinstance(client_script, (str, os.PathLike)):
            raise TypeError(f"client_script must be a path, not {client_script!r}")
        client_script = os.fspath(client_script)
        if not os.path.isfile(client_script):
            raise FileNotFoundError(f"client_script {client_script!r} does not exist")
        BatchJob(self).dump(DEFAULT_JOB_PATH)
        os.makedirs(os.path.join(".monarch", "logs"), exist_ok=True)
        self._log_dir = tempfile.mkdtemp(prefix="job_", dir=os.path.join(".monarch", "logs"))
        env = dict(os.environ, **{MONARCH_BATCH_JOB_ENV: "1"})
        with open(os.path.join(self._log_dir, "stdout.log"), "w") as out, \
                open(os.path.join(self._log_dir, "stderr.log"), "w") as err:
            self._proc = subprocess.Popen([sys.executable, client_script], env=env,
                                          stdout=out, stderr=err, start_new_session=True)

    @property
    def process(self):
        """The client script's process (``apply(client_script=...)``)."""
        if self._proc is None:
            raise ValueError("no local batch job")
        return self._proc

    def _state(self) -> JobState:
        from monarch_cy._actor.meshes.host_mesh import this_host
        return JobState({k: this_host() for k in self._host_names})

    def can_run(self, spec) -> bool:
        return False          # a LocalJob is the same whatever was saved: use the spec

    def _cache_state(self) -> dict:
        return {"hosts": list(self._host_names)}

    @classmethod
    def _from_cache(cls, d: dict) -> "LocalJob":
        job = cls(d["hosts"])
        job._status = "running"
        return job


@job_cache.register
class BatchJob(JobTrait):
    """A job wrapped so that the batch client it started (``MONARCH_BATCH_JOB=1``)
    re-attaches to it from the cache; any other controller applies its own."""

    def __init__(self, job: JobTrait) -> None:
        self._job = job

    @property
    def _running(self):
        return self

    def can_run(self, spec) -> bool:
        if in_batch_job():
            import atexit
            atexit.register(self._kill)
            return True
        return False

    def _state(self) -> JobState:
        return self._job._state()

    def _create(self, client_script) -> None:
        self._job._create(client_script)

    def _kill(self) -> None:
        self._job._kill()

    def _cache_state(self) -> dict:
        inner = self._job
        if job_cache.encode_json(inner) is None:
            raise job_cache.NotJSON(f"a BatchJob of a {type(inner).__name__} is pickled")
        return {"type": type(inner).__name__, "state": inner._cache_state()}

    @classmethod
    def _from_cache(cls, d: dict) -> "BatchJob":
        inner = job_cache._TYPES.get(d["type"])
        if inner is None or inner is BatchJob:
            raise ValueError(f"unknown job type {d['type']!r}")
        return cls(inner._from_cache(d["state"]))


_config_jobs = []


def hosts_from_config(name: str):
    """The host mesh ``name`` (see the module docstring)."""
    _check_name(name)
    job = ProcessJob({name: 2})
    st = job.state(cached_path=None)
    _config_jobs.append(job)
    return getattr(st, name)
