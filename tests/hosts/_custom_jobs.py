"""Job types of a program's own (importable by name, as a cached job's class must
be), for the job cache tests."""

from __future__ import annotations

import os

from monarch_cy.job import JobState, JobTrait


class Marker:
    """Stands for a host mesh in a job state (no runtime needed)."""

    def __init__(self, name: str) -> None:
        self.name = name


class RecordingJob(JobTrait):
    """A scheduler of the program's own: records what the life cycle called."""

    def __init__(self, hosts=("default",), compatible=None) -> None:
        super().__init__()
        self.hosts = tuple(hosts)
        self.compatible = compatible      # None: runs any spec; else a list of specs
        self.created = self.killed = False

    def _create(self, client_script):
        self.created = True

    def _state(self) -> JobState:
        return JobState({h: Marker(h) for h in self.hosts})

    def can_run(self, spec) -> bool:
        return self.compatible is None or spec in self.compatible

    def _kill(self):
        self.killed = True


class Trap:
    """Unpickling it creates the file named by its path: a cache that would run it
    must be refused before any unpickling."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def exists(path: str) -> bool:
    return os.path.exists(path)
