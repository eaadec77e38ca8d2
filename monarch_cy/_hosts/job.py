"""Job types: where a controller's hosts come from (Monarch's ``monarch.job`` shape).

A job is declarative: construct it with the meshes you want (name -> number of
hosts), ``apply()`` asks the scheduler for them, ``state()`` waits until their
agents are up and returns a :class:`JobState` whose attributes are ``HostMesh``es,
``kill()`` gives the hosts back.  The controller's exit (normal or not) ends the
job too: see each job type.
"""

from __future__ import annotations

from monarch_cy._checks import is_int

__all__ = ["JobState", "JobTrait", "split_meshes", "check_meshes"]


class JobState:
    """The host meshes of a job, by name: ``state.trainers`` or ``state["trainers"]``."""

    def __init__(self, meshes: dict) -> None:
        self._meshes = dict(meshes)

    def __getattr__(self, name):
        try:
            return self.__dict__["_meshes"][name]
        except KeyError:
            raise AttributeError(f"this job has no mesh named {name!r}; it has "
                                 f"{sorted(self.__dict__['_meshes'])!r}") from None

    def __getitem__(self, name):
        return getattr(self, name)

    def __iter__(self):
        return iter(self._meshes)

    def __repr__(self):
        return f"<JobState {dict((k, v.sizes) for k, v in self._meshes.items())!r}>"


class JobTrait:
    """What every job type offers: ``apply()``, ``state()``, ``kill()``, ``with``."""

    def apply(self) -> None:
        raise NotImplementedError

    def state(self) -> JobState:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

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
