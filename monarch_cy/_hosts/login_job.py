"""``LoginJob``: a job over hosts the program logs into itself (Monarch's base class
for ``SSHJob`` and the like).

A subclass implements ``_start_host(host) -> ProcessState``: start a worker for
``host`` (``run_worker_loop_forever`` at some address, over ssh or otherwise) and
return the process that runs it and the address it serves.  Then::

    job = MySSHJob(...)
    job.add_mesh("trainers", ["node0", "node1"])
    state = job.state(cached_path=None)        # apply(): _start_host per host
    state.trainers.spawn_procs(...)

``apply()`` starts every host's worker once (``_host_to_pid``: host -> its
``ProcessState``); ``state()`` attaches to their addresses (one ``HostMesh`` per
mesh, in the order given); ``kill()`` SIGKILLs the processes ``_start_host``
returned.  A cached job re-attaches while every one of them still runs
(``can_run``: same meshes).  It caches as a job type of the program's own (a pickle
signed with this user's secret, :mod:`.job_cache`).
"""

from __future__ import annotations

import os
import signal

from monarch_cy._hosts.job import JobState, JobTrait, ProcessState

__all__ = ["LoginJob"]


class LoginJob(JobTrait):
    """Hosts named by the program, their workers started by ``_start_host``."""

    def __init__(self) -> None:
        self._meshes: dict = {}           # mesh name -> [host, ...]
        self._host_to_pid: dict = {}      # host -> ProcessState

    def add_mesh(self, name: str, hosts: list) -> None:
        """Ask for a mesh ``name`` over ``hosts`` (before ``apply``/``state``)."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"mesh name {name!r} must be a Python identifier")
        if isinstance(hosts, (str, bytes)) or not all(isinstance(h, str) for h in hosts):
            raise TypeError(f"hosts must be a list of host names, not {hosts!r}")
        self._meshes[name] = list(hosts)

    def _start_host(self, host: str) -> ProcessState:
        raise NotImplementedError(f"{type(self).__name__} must implement "
                                  "_start_host(host) -> ProcessState")

    def _create(self, client_script) -> None:
        if client_script is not None:
            raise RuntimeError(f"LoginJob cannot run batch-mode scripts "
                               f"(client_script={client_script!r})")
        if not self._meshes:
            raise ValueError("this LoginJob has no mesh: call add_mesh(name, hosts) first")
        try:
            for hosts in self._meshes.values():
                for host in hosts:
                    st = self._start_host(host)
                    if not isinstance(st, ProcessState):
                        raise TypeError(f"_start_host({host!r}) returned {st!r}, not a "
                                        "ProcessState(pid, channel)")
                    self._host_to_pid[host] = st
        except BaseException:
            self._kill()
            raise

    def _state(self) -> JobState:
        from monarch_cy._hosts.attach import attach_to_workers  # deferred: import time
        if not self._pids_active():
            raise RuntimeError("LoginJob: lost a worker process "
                               f"({self._host_to_pid!r}); kill() it and apply again")
        return JobState({
            name: attach_to_workers(name=name, ca="trust_all_connections", workers=[
                self._host_to_pid[h].channel for h in hosts])
            for name, hosts in self._meshes.items()})

    def can_run(self, spec) -> bool:
        return (isinstance(spec, LoginJob) and spec._meshes == self._meshes
                and self._pids_active())

    def _pids_active(self) -> bool:
        if not self.active:
            return False
        for p in self._host_to_pid.values():
            try:
                os.kill(p.pid, 0)
            except OSError:
                return False
        return True

    def _kill(self) -> None:
        for p in self._host_to_pid.values():
            try:
                os.kill(p.pid, signal.SIGKILL)
            except OSError:
                pass
