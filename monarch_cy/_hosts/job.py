"""Job types: where a controller's hosts come from (Monarch's ``monarch.job`` shape).

A job is declarative: construct it with the meshes you want (name -> number of
hosts), ``apply()`` asks the scheduler for them, ``state()`` waits until their
agents are up and returns a :class:`JobState` whose attributes are ``HostMesh``es,
``kill()`` gives the hosts back.  The controller's exit (normal or not) ends the
job too, unless the job was cached for later controllers: see each job type.

:class:`JobTrait` carries Monarch's generic life cycle, which job types built on
``_create`` / ``_state`` / ``_kill`` / ``can_run`` inherit (``ProcessJob``,
``LocalJob``, the SPMD jobs): ``apply(client_script=None)`` creates the job once;
``state(cached_path=DEFAULT_JOB_PATH)`` returns the running job's meshes, else
re-attaches to a job cached at ``cached_path`` that ``can_run`` this specification
(a cached job that cannot is killed and its file removed), else applies this job
and caches it there (each call connects anew, as Monarch's); ``kill()`` ends it;
``active`` says whether it runs; ``apply_id`` names the running allocation;
``dump(path)`` / ``dumps()`` write the cache (:mod:`.job_cache`: JSON for monarch_cy's
job types, a pickle signed with this user's secret for a job type of the program's
own, as Monarch lets programs add schedulers).
``SlurmJob`` and ``KubernetesJob`` keep their own ``apply/state/kill``.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from monarch_cy._checks import is_int

__all__ = ["JobState", "JobTrait", "ProcessState", "split_meshes", "check_meshes",
           "DEFAULT_JOB_PATH"]

DEFAULT_JOB_PATH = ".monarch/job_state.pkl"


class ProcessState(NamedTuple):
    """A worker process of a job (Monarch's): its ``pid`` and the address it serves
    (``channel``, a worker address, :mod:`.worker_address`)."""

    pid: int
    channel: str


class _CachedRunning:
    """``_status`` of a spec whose job runs as another (loaded) job object."""

    def __init__(self, job) -> None:
        self.job = job


class JobState:
    """The host meshes of a job, by name: ``state.trainers`` or ``state["trainers"]``
    (Monarch's ``JobState(hosts, query_engine=None, query_engine_client=None,
    telemetry_url=None, dashboard_url=None, admin_url=None)``).

    Monarch's service attributes are ``None`` here unless a job type sets them:
    monarch_cy runs no query engine, telemetry sidecar or mesh admin of Monarch's
    (``enable_telemetry`` exports through OpenTelemetry instead).  A name that is
    neither raises ``AttributeError`` listing the meshes."""

    def __init__(self, hosts: dict, query_engine=None, query_engine_client=None,
                 telemetry_url: str | None = None, dashboard_url: str | None = None,
                 admin_url: str | None = None) -> None:
        self._hosts = dict(hosts)
        self.query_engine = query_engine
        self.query_engine_client = query_engine_client
        self.telemetry_url = telemetry_url
        self.dashboard_url = dashboard_url
        self.admin_url = admin_url

    def __getattr__(self, name):
        hosts = self.__dict__.get("_hosts", {})
        try:
            return hosts[name]
        except KeyError:
            raise AttributeError(f"{name!r} is not a valid host mesh name. Available "
                                 f"names: {', '.join(sorted(hosts))}") from None

    def __getitem__(self, name):
        return getattr(self, name)

    def __iter__(self):
        return iter(self._hosts)

    def __repr__(self):
        return f"<JobState {dict((k, getattr(v, 'sizes', v)) for k, v in self._hosts.items())!r}>"


class JobTrait:
    """What every job type offers: ``apply()``, ``state()``, ``kill()``, ``active``,
    ``can_run()``, ``dump()``/``dumps()``, ``with`` (module docstring)."""

    _status = "not_running"          # "running" | "not_running" | _CachedRunning
    _apply_id = None                 # a uuid per apply() that created the job

    # -- what a job type provides ---------------------------------------------
    def _create(self, client_script: str | None) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement apply()")

    def _state(self) -> JobState:
        raise NotImplementedError(f"{type(self).__name__} does not implement state()")

    def _kill(self) -> None:
        pass

    def can_run(self, spec: "JobTrait") -> bool:
        """Whether this (running) job can serve ``spec`` instead of a new one: how a
        cached job is chosen for re-attaching.  Default: never."""
        return False

    def _cache_state(self) -> dict:
        raise TypeError(f"a {type(self).__name__} cannot be dumped to a job cache")

    def _on_dumped(self) -> None:
        """Called after the job was written to a cache: it must outlive this
        controller from now on."""

    # -- life cycle (Monarch's JobTrait) ---------------------------------------
    @property
    def _running(self):
        st = self._status
        if st == "running":
            return self
        if isinstance(st, _CachedRunning):
            return st.job
        return None

    @property
    def active(self) -> bool:
        """True while this job (or the cached job it re-attached to) runs."""
        return self._running is not None

    def enable_telemetry(self, config=None, *, mesh_admin_config=None, **kwargs):
        """Turn telemetry on (``monarch_cy.telemetry.enable_telemetry``) at the next
        :meth:`state` call, as Monarch's: in this controller and in every proc spawned
        after it.  ``config``: a ``TelemetryConfig``, else one made from ``kwargs``
        (checked now).  ``mesh_admin_config`` (Monarch's mesh admin) is accepted and
        unused.  Returns ``self``, for chaining."""
        from monarch_cy._telemetry.config import TelemetryConfig  # deferred: import time
        if config is None:
            config = TelemetryConfig(**kwargs)
        elif not isinstance(config, TelemetryConfig):
            raise TypeError(f"config must be a TelemetryConfig, not {config!r}")
        self._telemetry = config
        return self

    def _start_telemetry(self) -> None:
        """Called first by every ``state()``: start what :meth:`enable_telemetry` asked."""
        config = self.__dict__.get("_telemetry")
        if config is not None:
            from monarch_cy._telemetry.api import enable_telemetry  # deferred: import time
            enable_telemetry(config)

    def apply(self, client_script: str | None = None) -> None:
        """Create the job as specified; a no-op when it already runs.
        ``client_script``: run that script as the job's client (job types that
        support batch mode; the others raise ``RuntimeError``)."""
        if self._running is None:
            self._create(client_script)
            import uuid
            self._apply_id = str(uuid.uuid4())
            self._status = "running"

    @property
    def apply_id(self) -> str | None:
        """A uuid naming the running allocation (kept by a cache; None while the job
        does not run), as Monarch's."""
        running = self._running
        return running.__dict__.get("_apply_id") if running is not None else None

    def state(self, cached_path: str | None = DEFAULT_JOB_PATH) -> JobState:
        """The job's host meshes by name (module docstring for ``cached_path``).
        Each call connects anew, as Monarch's does: a fresh ``JobState`` whose host
        meshes are separate from those of earlier calls (stopping one stops only the
        procs spawned from it)."""
        self._start_telemetry()
        if cached_path is not None:
            if not isinstance(cached_path, (str, os.PathLike)):
                raise TypeError(f"cached_path must be a path (str) or None, not "
                                f"{cached_path!r}")
            cached_path = os.fspath(cached_path)
        running = self._running
        if running is not None:
            return self._handed_out(running._state())
        cached = self._load_cached(cached_path)
        if cached is not None:
            self._status = _CachedRunning(cached)
            try:
                return self._handed_out(cached._state())
            except BaseException:
                self._status = "not_running"     # the cached job is left running
                raise
        self.apply()
        try:
            st = self._state()
            if cached_path is not None:
                self.dump(cached_path)
        except BaseException:
            self.kill()
            raise
        return self._handed_out(st)

    def _handed_out(self, st: JobState) -> JobState:
        """Remember (weakly) the host meshes of ``st``: :meth:`kill` stops their procs
        before the hosts go, so that their end is no failure."""
        import weakref
        out = self.__dict__.setdefault("_meshes_out", [])
        out[:] = [r for r in out if r() is not None]
        for hm in getattr(st, "_hosts", {}).values():
            try:
                out.append(weakref.ref(hm))
            except TypeError:              # not weakly referable: a job type's own object
                pass
        return st

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_meshes_out", None)     # this process's meshes, not the job's
        return state

    def _load_cached(self, path: str | None):
        if path is None:
            return None
        from monarch_cy._hosts import job_cache
        job = job_cache.load_if_present(path)
        if job is None:
            return None
        running = job._running
        if running is None:
            return None
        if not running.can_run(self):
            from monarch_cy._hosts.protocol import log
            log.warning("the job cached in %s cannot run this job; ending it and "
                        "removing the file", path)
            try:
                running._kill()
            except Exception as e:                   # best effort, as Monarch
                log.warning("ending the cached job in %s failed: %s", path, e)
            job_cache.remove(path)
            return None
        return job

    def kill(self) -> None:
        """End the job (or the cached job this spec re-attached to); idempotent.
        The procs spawned here from host meshes its ``state()`` gave are stopped
        first (their end is on purpose, not a failure), and those meshes are then
        shut down."""
        running = self._running
        self._status = "not_running"
        for ref in self.__dict__.pop("_meshes_out", ()):
            abandon = getattr(ref(), "_abandon", None)
            if abandon is not None:
                abandon()
        if running is not None:
            running._status = "not_running"
            running._kill()

    def dumps(self) -> bytes:
        """This job's cache document (bytes; :func:`job_loads` reads it): JSON for
        monarch_cy's job types, a signed pickle for a job type of the program's own
        (:mod:`.job_cache`)."""
        from monarch_cy._hosts import job_cache
        data = job_cache.encode(self)
        self._on_dumped()
        return data

    def dump(self, filename: str) -> None:
        """Write :meth:`dumps` to ``filename`` (mode 0600, atomically; a symlink there
        is followed, as Monarch's ``dump`` does)."""
        from monarch_cy._hosts import job_cache
        job_cache.write(filename, job_cache.encode(self))
        self._on_dumped()

    def __reduce_ex__(self, protocol):
        # monarch_cy's job types pickle as their JSON cache document (no object
        # graph); any other job pickles as Monarch's do, attribute by attribute
        from monarch_cy._hosts import job_cache
        data = job_cache.encode_json(self)
        if data is None:
            return super().__reduce_ex__(protocol)
        from monarch_cy._hosts.job_cache import job_loads
        self._on_dumped()
        return (job_loads, (data,))

    def __enter__(self):
        self.apply()
        return self

    def __exit__(self, *exc):
        self.kill()


def check_meshes(meshes) -> dict:
    if not isinstance(meshes, dict) or not meshes:
        raise TypeError(f"meshes must be a non-empty dict of name -> number of hosts, "
                        f"not {meshes!r}")
    for k, v in meshes.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"mesh name {k!r} must be a Python identifier")
        if not is_int(v) or v < 1:
            raise ValueError(f"meshes[{k!r}] must be a positive number of hosts, not {v!r}")
    return dict(meshes)


def split_meshes(meshes: dict, hosts: list) -> JobState:
    """Give the hosts, in order, to the meshes, in order."""
    from monarch_cy._hosts.attach import host_mesh
    out, i = {}, 0
    for name, n in meshes.items():
        out[name] = host_mesh(hosts[i:i + n])
        i += n
    return JobState(out)
