"""``SlurmJob``: hosts from SLURM, one agent per allocated node.

Two lifetimes, chosen by how the hosts are asked for (Monarch's ``JobTrait``):

* **Owned by this controller** (``apply()``, or ``state()`` with no
  ``cached_path``): ``apply()`` submits a batch job (``sbatch``) whose script runs
  ``srun python -m monarch_cy._hosts.agent --connect tcp://<controller>:<port> --once``
  on every node (one task per node).  Inside an existing allocation
  (``$SLURM_JOB_ID`` set, or ``use_allocation=True``; e.g. a controller started by
  ``salloc`` or by an ``sbatch`` script) it starts that ``srun`` as a job step of the
  allocation instead.  The agents dial this controller's agent port
  (``monarch_port``, default 26600; 0 picks one), so nodes need no inbound agent
  port.  ``kill()``, the controller's normal exit and its death all end the job:
  ``scancel`` (or, for a step, ending the ``srun``); on death a small watchdog
  process started by ``apply()`` runs it as soon as its pipe from the controller
  closes, and the agents, seeing no heartbeat, kill their procs and exit.
* **Cached, for later controllers** (``state(cached_path=PATH)`` before any
  ``apply()``): if ``PATH`` holds the state of a running job with the same
  specification, this controller re-attaches to that job's agents (no new
  allocation); if it holds a job that cannot run this specification (another spec,
  or no longer running), that job is cancelled and the file removed, as Monarch
  does.  Otherwise it submits a job whose agents *listen* on ``monarch_port`` of
  every node (``--listen tcp://0.0.0.0:<port>``, no ``--once``), connects to them
  (``NodeAddr`` of each node, ``SLURM_NODEID`` order) and writes ``PATH``
  (:mod:`.slurm_cache`: JSON, mode 0600, it holds the job secret).  Such a job
  outlives the controller that made it: exit, crash or kernel restart only end that
  controller's procs.  It ends with ``kill()`` from any controller attached to it
  (which also removes ``PATH``) or at its ``time_limit``.

``state()`` waits for every agent and returns the host meshes, hosts given to the
meshes in order.  Failures raise :class:`SchedulerError` carrying SLURM's own message
verbatim and cancel what was started: a rejected submission (naming the parameter
the message points at, e.g. ``partition='x'`` or ``slurm_args[0]='--x'``), a job
that ends or pends for a reason that cannot clear before its agents are up, or one
still pending at the timeout (with its ``Reason``, e.g. ``ReqNodeNotAvail``).

The job secret never appears in the script or on a command line: it is passed in
the environment of ``sbatch``/``srun`` (SLURM propagates the submitter's environment
to the tasks, and keeps it in its private state), or, with ``secret_file=``, in a
0600 file on a shared filesystem whose path is passed instead.

The arguments and the script they make live in :mod:`.slurm_spec`, the SLURM tools
in :mod:`.slurm_cli`, the cache file in :mod:`.slurm_cache`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from monarch_cy._checks import check_timeout
from monarch_cy._hosts import protocol as P
from monarch_cy._hosts import slurm_cache as cache
from monarch_cy._hosts import slurm_cli as cli
from monarch_cy._errors import HostUnreachableError, SchedulerError
from monarch_cy._hosts.job import JobState, JobTrait, split_meshes
from monarch_cy._hosts.slurm_spec import SlurmSpec

__all__ = ["SlurmJob"]

_WATCHDOG = r"""
import os, signal, subprocess, sys
job, srun_pid = sys.argv[1], int(sys.argv[2])
if sys.stdin.buffer.read() == b"detach":   # EOF alone: the controller closed or died
    sys.exit(0)
if job != "-":
    subprocess.run(["scancel", job], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if srun_pid > 0:
    for sig in (signal.SIGTERM, signal.SIGTERM):   # srun: the second TERM ends the step
        try:
            os.kill(srun_pid, sig)
        except ProcessLookupError:
            break
"""


class SlurmJob(SlurmSpec, JobTrait):
    """Hosts from SLURM (module docstring).  ``meshes``: name -> number of nodes.

    Monarch's arguments, in Monarch's order: ``python_exe`` (on the nodes),
    ``slurm_args`` (extra sbatch options, one complete option per item, e.g.
    ``"--nodelist=n[0-3]"`` or ``"-w n0"``; each becomes an ``#SBATCH`` line, and
    for a step inside an allocation an ``srun`` option), ``monarch_port``,
    ``job_name``, ``ntasks_per_node`` (tasks SLURM reserves per node; one agent
    runs per node and its step gets ``ntasks_per_node * (cpus_per_task or 1)``
    CPUs, which the procs it starts share), ``time_limit`` (``--time``, e.g.
    ``"4:00:00"``), ``partition``, ``log_dir`` (the job's output file,
    ``slurm-<id>-<job_name>.out``; default the working directory), ``exclusive``
    (default False here, True in Monarch), ``gpus_per_node``, ``cpus_per_task``,
    ``mem``, ``job_start_timeout`` (seconds until every agent is up; default 600),
    ``account``, ``qos``.  ``out_of_cluster``/``attach_to`` are accepted only at
    their defaults (the agents dial the controller; there is no gateway).
    monarch_cy's own: ``proc_ports``, ``controller_host`` (the address the nodes
    reach this controller at; default ``MONARCH_CY_HOST`` /
    ``MONARCH_CY_CONTROLLER_INTERFACE``, else the route to slurmctld),
    ``use_allocation``, ``secret_file``.
    """

    # run-time state, class defaults (SlurmSpec.__init__ checks and sets the arguments)
    job_id = None                # the SLURM job id (inside an allocation: that one's)
    _mode = None                 # "owned" | "cached"
    _cache_path = _srun = _watchdog = _dialin = _state = _errfile = _last_info = None
    _cached_secret = None
    _last_poll = 0.0
    _ended = False

    @property
    def active(self) -> bool:
        """True from ``apply()`` (or a re-attach) until ``kill()``."""
        return self.job_id is not None and not self._ended

    # -- submission ----------------------------------------------------------
    def _controller_ip(self) -> str:
        from monarch_cy._hosts import attach
        return self.controller_host or attach.configured_ip() or \
            P.local_ip_towards(cli.slurmctld_host())

    def apply(self) -> None:
        """Submit the job (or start the step in this allocation) that this controller
        owns; returns at once.  A no-op once applied."""
        self._apply(cached=False)

    def _apply(self, cached: bool) -> None:
        if self.job_id is not None:
            return
        from monarch_cy._hosts.attach import at_shutdown, ensure_controller_node, get_hub
        inside = self.use_allocation if self.use_allocation is not None else \
            "SLURM_JOB_ID" in os.environ
        if cached and inside:
            raise ValueError(
                f"state(cached_path=...) re-attaches later controllers to a job this "
                f"class submits, but this controller runs inside allocation "
                f"{os.environ.get('SLURM_JOB_ID')!r}; pass use_allocation=False to submit "
                "a separate job, or cached_path=None to use this allocation")
        if cached and self.port == 0:
            raise ValueError("monarch_port=0 cannot be cached: later controllers dial "
                             "the agents at a fixed port; give monarch_port a port number")
        ip = self._controller_ip()
        node = ensure_controller_node(None, None, host=ip)
        addr = None
        if not cached:
            hub = get_hub(node)
            self._dialin = hub.dialin or hub.listen(f"tcp://{ip}:{self.port}")
            addr = self._dialin.addr
        env = dict(os.environ)
        env.pop("MONARCH_CY_JOB_SECRET_FILE", None)
        if self.secret_file:
            from monarch_cy._transport.secret import write_secret_file
            write_secret_file(self.secret_file, node.keys.secret)
            env["MONARCH_CY_JOB_SECRET_FILE"] = self.secret_file
            env.pop("MONARCH_CY_JOB_SECRET", None)
        else:
            env["MONARCH_CY_JOB_SECRET"] = node.keys.secret.hex()
        cmd = self._agent_cmd(addr)
        self._mode = "cached" if cached else "owned"
        if inside:
            self._start_step(cmd, env)
        else:
            self._submit(cmd, env)
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, self.job_id if not inside else "-",
             str(self._srun.pid if self._srun else 0)],
            stdin=subprocess.PIPE, start_new_session=True)
        if not cached:
            at_shutdown(self.kill)

    def _submit(self, cmd: list, env: dict) -> None:
        os.makedirs(self.log_dir, exist_ok=True)
        self.job_id = cli.submit(self, self._sbatch_script(cmd), env)
        P.log.info("SLURM job %s submitted for %d node(s)", self.job_id, self.nodes)

    def _start_step(self, cmd: list, env: dict) -> None:
        self.job_id = os.environ.get("SLURM_JOB_ID")
        self._errfile = tempfile.TemporaryFile()
        self._srun = subprocess.Popen(
            ["srun", *self._step_opts(), *self.slurm_args, *cmd], env=env,
            stdout=subprocess.DEVNULL, stderr=self._errfile, start_new_session=True)

    # -- state ---------------------------------------------------------------
    def _info(self, force: bool = False):
        now = time.monotonic()
        if force or now - self._last_poll >= 1.0:
            self._last_poll, self._last_info = now, cli.job_info(self.job_id) or \
                {"state": "GONE", "reason": "SLURM no longer knows it", "nodes": ""}
        return self._last_info

    def _why_ended(self):
        """A ``SchedulerError`` if the job (or step) ended or cannot start, else None."""
        if self._srun is not None:
            if self._srun.poll() is None:
                return None
            self._errfile.seek(0)
            msg = self._errfile.read().decode(errors="replace").strip()
            return SchedulerError(f"srun ended (status {self._srun.returncode}): "
                                  f"{msg[-2000:] or 'no message'}")
        info = self._info()
        what = f"{info['state']} ({info['reason']})"
        if cli.hopeless(info):
            return SchedulerError(f"SLURM job {self.job_id} cannot start: {what}")
        if info["state"] in cli.TERMINAL or info["state"] == "GONE":
            return SchedulerError(f"SLURM job {self.job_id} ended before its agents "
                                  f"connected: {what}{self._log_tail()}")
        return None

    def _log_tail(self) -> str:
        """The end of the job's output file (srun's and the agents' words), if readable."""
        if not self.log_path:
            return ""
        try:
            with open(self.log_path, errors="replace") as f:
                tail = f.read()[-1500:].strip()
        except OSError:
            tail = ""
        return f"; its output ({self.log_path}):\n{tail}" if tail else \
            f"; its output: {self.log_path}"

    def _timed_out(self, e: Exception, t: float) -> Exception:
        """The error for agents not all up within ``t`` s: SLURM's view added."""
        if self._srun is not None:
            return e
        info = self._info(force=True)
        if info["state"] == "PENDING":
            return SchedulerError(f"SLURM job {self.job_id} did not start within "
                                  f"{t:.0f} s: PENDING ({info['reason']})")
        return type(e)(f"{e}; SLURM job {self.job_id} is {info['state']} on "
                       f"{info['nodes'] or '?'}; its output: {self.log_path}")

    def state(self, cached_path: str | None = None, timeout: float | None = None) -> JobState:
        """Wait for every node's agent; the host meshes by name (module docstring).

        ``cached_path``: re-attach to / record a job that later controllers can
        re-attach to (Monarch's ``state(cached_path=...)``; monarch_cy's default is
        None, a job this controller owns).  ``timeout``: seconds (default
        ``job_start_timeout``, else 600)."""
        self._start_telemetry()
        if cached_path is not None:
            if not isinstance(cached_path, (str, os.PathLike)):
                raise TypeError(f"cached_path must be a path (str) or None, got "
                                f"{cached_path!r}")
            cached_path = os.fspath(cached_path)
            if self._mode == "owned":
                raise ValueError(
                    f"state(cached_path={cached_path!r}) after apply(): this controller "
                    "already owns SLURM job " + str(self.job_id) + ", which ends with it; "
                    "call state(cached_path=...) without apply() for a job later "
                    "controllers can re-attach to")
        if self._state is not None:
            return self._state
        t = timeout if timeout is not None else (self.job_start_timeout or 600.0)
        t = check_timeout("timeout", t)
        path = cached_path or self._cache_path
        if path is not None and self.job_id is None and self._reattach(path, t):
            return self._state            # (a failed re-attach leaves that job running)
        try:
            if path is None:
                self._apply(cached=False)
                try:
                    hosts = self._dialin.wait(self.nodes, t, abort=self._why_ended)
                except HostUnreachableError as e:
                    raise self._timed_out(e, t) from None
            else:
                self._cache_path = path
                self._apply(cached=True)
                hosts = self._attach(self._workers(time.monotonic() + t, t), t)
                cache.write(path, {"job_id": self.job_id, "spec": self._spec(),
                                   "workers": [h.endpoint for h in hosts],
                                   "secret": None if self.secret_file else
                                   self._secret().hex(),
                                   "secret_file": self.secret_file})
                self._detach_watchdog()
        except Exception:
            self.kill()
            raise
        self._state = split_meshes(self.meshes, hosts)
        return self._state

    def _secret(self) -> bytes:
        from monarch_cy._transport.node import current_node
        return current_node().keys.secret

    def _detach_watchdog(self) -> None:
        w, self._watchdog = self._watchdog, None
        if w is not None:
            try:
                w.stdin.write(b"detach")
                w.stdin.close()
                w.wait(10)
            except Exception:
                pass

    def _workers(self, deadline: float, t: float) -> list:
        """Wait until the job runs; its agents' addresses, in ``SLURM_NODEID`` order."""
        while True:
            err = self._why_ended()
            if err is not None:
                raise err
            info = self._last_info
            if info["state"] == "RUNNING" and info["nodes"]:
                return [f"tcp://{a}:{self.port}" for a in cli.node_addrs(info["nodes"])]
            if time.monotonic() > deadline:
                raise self._timed_out(RuntimeError("not running"), t)
            time.sleep(0.2)

    def _attach(self, workers: list, t: float) -> list:
        """Connect to listening agents; they are all up, or the first failure raises."""
        from monarch_cy._hosts.attach import ensure_controller_node, get_hub
        node = ensure_controller_node(P.parse_tcp(workers[0])[0], self._cached_secret,
                                      host=self.controller_host)
        hub = get_hub(node)
        hosts = [hub.connect(w, t) for w in workers]
        for h in hosts:
            while h.state == "connecting":
                err = self._why_ended()
                if err is not None:
                    raise err
                h.ready.wait(0.2)
            if h.state != "up":
                raise type(h.error)(f"{h.error}; SLURM job {self.job_id} is "
                                    f"{self._info(force=True)['state']}; its output: "
                                    f"{self.log_path}")
        return hosts

    def _reattach(self, path: str, t: float) -> bool:
        """Attach to the running job cached at ``path``; False when there is none that
        can run this spec (such a job is cancelled and the file removed)."""
        d = cache.read(path)
        if d is None:
            return False
        job_id = d["job_id"]
        info = cli.job_info(job_id)
        running = info is not None and info["state"] == "RUNNING"
        if d.get("spec") != self._spec() or not running:
            why = "another specification" if running else \
                f"{info['state']} ({info['reason']})" if info else "gone"
            P.log.warning("cached SLURM job %s in %s cannot run this job (%s); "
                          "cancelling it and submitting a new one", job_id, path, why)
            if info is not None and info["state"] not in cli.TERMINAL:
                cli.cancel(job_id)
            cache.remove(path)
            return False
        from monarch_cy._transport.secret import load_secret
        self._cached_secret = bytes.fromhex(d["secret"]) if d.get("secret") else \
            load_secret(d["secret_file"])
        self.job_id, self._mode, self._cache_path = job_id, "cached", path
        P.log.info("re-attaching to SLURM job %s (cached in %s)", job_id, path)
        hosts = self._attach(d["workers"], t)       # failure: the job is left running
        self._state = split_meshes(self.meshes, hosts)
        return True

    def kill(self) -> None:
        """Cancel the job (or end the step) and remove its cached state; idempotent."""
        if self._watchdog is not None:
            try:
                self._watchdog.stdin.close()
                self._watchdog.wait(10)
            except Exception:
                pass
            self._watchdog = None
        if self._ended or self.job_id is None:
            return
        self._ended = True
        if self._srun is None:
            msg = cli.cancel(self.job_id)
            if msg:
                P.log.warning("scancel %s: %s", self.job_id, msg)
        elif self._srun.poll() is None:
            self._srun.terminate()
            try:
                self._srun.wait(5)
            except subprocess.TimeoutExpired:
                self._srun.kill()
                self._srun.wait()
        if self._cache_path:
            cache.remove(self._cache_path, self.job_id)
