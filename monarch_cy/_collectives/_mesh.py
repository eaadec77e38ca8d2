"""Collective groups over proc meshes, set up from the controller.

The controller calls :func:`create_group` (one group over a mesh or any slice of
it) or :func:`create_groups` (one group per line along a mesh dimension: per
row, per column).  It spawns a small agent actor in every proc of the mesh,
asks the first member of each group for the rendezvous (an NCCL unique id, or a
free TCP port on its host for gloo), sends it to every member, and every agent
joins at once.  Actors running in those procs then use the group through
:func:`group` (``group("dp").all_reduce(t)``): the group belongs to the process,
not to one actor.

``create_group`` blocks until every member joined (bounded by ``timeout``).
Names are unique per process: joining a name already in use fails.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from monarch_cy import _config
from monarch_cy._collectives._factory import BACKENDS, default_backend, make_group
from monarch_cy._collectives._group import Group
from monarch_cy._host_identity import host_id
from monarch_cy.actor import Actor, context, endpoint

__all__ = ["create_group", "create_groups", "group", "group_names", "destroy_group",
           "setup_torch_distributed"]

_GROUPS: dict[str, Group] = {}
_LOCK = threading.Lock()


def group(name: str = "world") -> Group:
    """This process's member of group ``name`` (call it inside an actor)."""
    with _LOCK:
        g = _GROUPS.get(name)
    if g is None:
        known = ", ".join(sorted(_GROUPS)) or "none"
        raise KeyError(f"this process is in no group named {name!r} (groups here: {known}); "
                       "create it from the controller with create_group(...)")
    return g


def group_names() -> list[str]:
    with _LOCK:
        return sorted(_GROUPS)


def _reachable_address() -> str:
    """An address of this host that other hosts of the job can reach."""
    addr = _config.host_address()
    if addr:
        return addr
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class GroupAgent(Actor):
    """The per-proc agent that makes and holds this process's groups."""

    @endpoint
    def info(self) -> dict:
        return {"host": host_id(), "address": _reachable_address(), "backend": default_backend(),
                "pid": os.getpid()}

    @endpoint
    def rendezvous(self, backend: str, host: str):
        from monarch_cy._collectives._rendezvous import TcpRendezvous, UniqueId, pick_free_port

        if backend == "nccl":
            return UniqueId.generate()
        return TcpRendezvous(host, pick_free_port(host if host == "127.0.0.1" else "0.0.0.0"))

    @endpoint
    def join(self, name: str, backend: str, plan: dict, timeout: float) -> tuple[int, int]:
        """Join the group of this proc's colour in ``plan``; blocks until all members did."""
        rank, size, color = plan["members"][_point_key(context().actor_instance.rank)]
        with _LOCK:
            if name in _GROUPS:
                raise ValueError(f"a group named {name!r} already exists in this process")
        g = make_group(backend, rank, size, plan["rendezvous"][color], timeout=timeout)
        with _LOCK:
            _GROUPS[name] = g
        return rank, size

    @endpoint
    def leave(self, name: str) -> bool:
        with _LOCK:
            g = _GROUPS.pop(name, None)
        if g is not None:
            g.close()
        return g is not None

    @endpoint
    def torch_env(self, env: dict) -> None:
        os.environ.update(env)


def _point_key(point) -> tuple:
    return tuple(sorted(dict(point).items()))


_AGENTS: dict[tuple, Any] = {}
_COUNT = iter(range(1 << 62))


def _agents(mesh):
    """One agent per proc of ``mesh`` (a ProcMesh or a slice), cached per slice."""
    if not hasattr(mesh, "spawn"):
        raise TypeError(f"mesh must be a ProcMesh or a slice of one, got {type(mesh).__name__}")
    key = (id(mesh._state), tuple(mesh._shape.global_ranks()))
    agents = _AGENTS.get(key)
    if agents is None:
        agents = _AGENTS[key] = mesh.spawn(f"_mcy_group_agent_{next(_COUNT)}", GroupAgent)
    return agents


def _plan(points: list, along: str | None) -> tuple[dict, dict]:
    """{point_key: (rank, size, color)} and {color: [point_keys in rank order]}."""
    colors: dict[tuple, list] = {}
    for p in points:
        d = dict(p)
        if along is None:
            color = ()
        else:
            if along not in d:
                raise ValueError(f"along={along!r} is not a dimension of the mesh (dimensions: {list(d)})")
            color = tuple((k, v) for k, v in sorted(d.items()) if k != along)
        colors.setdefault(color, []).append(_point_key(p))
    members = {}
    for color, keys in colors.items():
        for r, k in enumerate(keys):
            members[k] = (r, len(keys), color)
    return members, colors


def create_groups(mesh, name: str, *, along: str | None = None, backend: str | None = None,
                  timeout: float = 120.0) -> dict:
    """Groups over ``mesh`` (a ProcMesh or a slice): one in all, or one per line
    ``along`` a dimension.  Returns ``{color: size}`` (color: the other
    coordinates).  Blocks until every member joined."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty str, got {name!r}")
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    if len(mesh) == 0:
        raise ValueError("cannot make a group over an empty mesh")
    agents = _agents(mesh)
    infos = agents.info.call().get(timeout=timeout)
    points = [p for p, _ in infos.items()]
    members, colors = _plan(points, along)
    by_key = {_point_key(p): info for p, info in infos.items()}
    if backend is None:
        backend = "nccl" if all(i["backend"] == "nccl" for i in by_key.values()) else "gloo"
    single_host = len({i["host"] for i in by_key.values()}) == 1
    rendezvous = {}
    for color, keys in colors.items():
        first = dict(keys[0])
        host = "127.0.0.1" if single_host else by_key[keys[0]]["address"]
        rendezvous[color] = agents.slice(**first).rendezvous.call_one(backend, host).get(timeout=timeout)
    plan = {"members": members, "rendezvous": rendezvous}
    agents.join.call(name, backend, plan, timeout).get(timeout=timeout + 30)
    return {color: len(keys) for color, keys in colors.items()}


def create_group(mesh, name: str = "world", *, backend: str | None = None, timeout: float = 120.0) -> int:
    """One group over every proc of ``mesh`` (or of a slice); returns its size."""
    return create_groups(mesh, name, along=None, backend=backend, timeout=timeout)[()]


def destroy_group(mesh, name: str) -> None:
    """Close group ``name`` in every proc of ``mesh``."""
    _agents(mesh).leave.call(name).get()


def setup_torch_distributed(mesh, *, master_port: int | None = None) -> dict:
    """Monarch's pattern: set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
    in every proc of ``mesh`` so actors can call ``torch.distributed.init_process_group``
    themselves.  Returns the master address and port."""
    from monarch_cy._collectives._torch_env import setup_torch_env

    agents = _agents(mesh)
    infos = agents.info.call().get()
    items = list(infos.items())
    single_host = len({i["host"] for _, i in items}) == 1
    addr = "127.0.0.1" if single_host else items[0][1]["address"]
    port = master_port or agents.slice(**dict(items[0][0])).rendezvous.call_one("gloo", addr).get().port
    local = {}
    for p, info in items:
        local.setdefault(info["host"], []).append(_point_key(p))
    for rank, (p, info) in enumerate(items):
        peers = local[info["host"]]
        env = setup_torch_env(rank, len(items), peers.index(_point_key(p)), addr, port,
                              local_world_size=len(peers), environ={})
        agents.slice(**dict(p)).torch_env.call_one(env).get()
    return {"master_addr": addr, "master_port": port}
