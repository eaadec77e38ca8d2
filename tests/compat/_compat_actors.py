"""Actor classes shared by the compatibility tests (importable by worker procs)."""

from __future__ import annotations

import asyncio
import os

from monarch_cy.actor import (Actor, ProcMesh, concurrent_endpoint, context,
                              current_actor_name, endpoint, get_or_spawn_controller,
                              this_host)


class Registry(Actor):
    """A job-wide singleton (get_or_spawn_controller)."""

    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        self.items = []

    @endpoint
    def add(self, x) -> int:
        self.items.append(x)
        return len(self.items)

    @endpoint
    def where(self) -> tuple:
        return os.getpid(), self.tag


class Leaf(Actor):
    def __init__(self, tag: str = "") -> None:
        self.tag = tag

    @endpoint
    def pid(self) -> tuple:
        return os.getpid(), self.tag

    @endpoint
    def message(self) -> tuple:
        r = context().message_rank
        return dict(r), r.rank, current_actor_name()


class Parent(Actor):
    """Holds handles it was given (a proc mesh, an actor mesh, a host mesh)."""

    def __init__(self, procs: ProcMesh | None = None) -> None:
        self.procs = procs
        self.kept = None

    @endpoint
    def spawn_leaves(self, tag: str) -> list:
        leaves = self.procs.spawn("leaves", Leaf, tag)
        return leaves.pid.call().get(20).values()

    @endpoint
    def call_mesh(self, mesh) -> list:
        return mesh.pid.call().get(20).values()

    @endpoint
    def reply_through(self, port, value) -> None:
        port.send((value, os.getpid()))

    @endpoint
    def keep(self, handle):
        self.kept = handle
        return handle

    @endpoint
    def stop_kept(self) -> None:
        return self.kept.stop().get(20)

    @endpoint
    def registry_add(self, name: str, x) -> int:
        reg = get_or_spawn_controller(name, Registry, "from-actor").get(20)
        return reg.add.call_one(x).get(20)

    @endpoint
    def own_procs(self) -> list:
        pm = this_host().spawn_procs(per_host={"procs": 2})
        try:
            return pm.spawn("mine", Leaf, "own").pid.call().get(20).values()
        finally:
            pm.stop().get(20)


class Named(Actor):
    """Endpoints named like ActorMesh attributes (Monarch allows them)."""

    @endpoint
    def stop(self) -> str:
        return "stop endpoint"

    @endpoint
    def size(self) -> str:
        return "size endpoint"

    @endpoint
    def sizes(self) -> str:
        return "sizes endpoint"

    @endpoint
    def slice(self, x: int) -> int:
        return x + 1


class Aborter(Actor):
    def __init__(self) -> None:
        self.cleaned = []

    @endpoint
    def abort(self, reason: str) -> str:
        context().actor_instance.abort(reason)
        return "finished after abort"

    @endpoint
    def ping(self) -> int:
        return 1

    def __cleanup__(self, exc) -> None:
        self.cleaned.append(exc)


class Mixed(Actor):
    @endpoint
    def a(self) -> int:
        return 1

    @endpoint
    async def b(self) -> int:
        return 2


class Concurrent(Actor):
    def __init__(self) -> None:
        self.events = []

    @concurrent_endpoint
    async def slow(self, t: float) -> str:
        self.events.append("slow start")
        await asyncio.sleep(t)
        self.events.append("slow end")
        return "slow"

    @endpoint
    async def fast(self) -> list:
        self.events.append("fast")
        return list(self.events)


def _append(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")


class Lifecycle(Actor):
    """Writes what happens to it into a file (its process may be gone afterwards)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _note(self, what: str) -> None:
        _append(self.path, what)

    @endpoint
    def work(self, i: int) -> None:
        import time
        time.sleep(0.01)
        self._note(f"work {i}")

    def __cleanup__(self, exc) -> None:
        self._note(f"cleanup {exc!r}")

    def __del__(self) -> None:
        self._note("del")


class AsyncLifecycle(Actor):
    """An async actor whose endpoint is still awaiting when its proc stops."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _note(self, what: str) -> None:
        _append(self.path, what)

    @concurrent_endpoint        # never ends: later messages must not queue behind it
    async def hang(self) -> None:
        self._note("hang")
        try:
            await asyncio.Event().wait()
        finally:
            self._note("hang cancelled")

    async def __cleanup__(self, exc) -> None:
        self._note(f"cleanup {exc!r}")

    def __del__(self) -> None:
        self._note("del")
