"""Verbs devices: discovery and the open device context.

:func:`list_devices` never raises for "no RDMA here"; it returns ``[]`` and
:func:`unavailable_reason` says why.  :class:`Context` opens one device (the
first, unless named) and holds what connecting needs: the port's LID and MTU,
the GID to use, and the device limits.  Closing a context closes its protection
domains (and so their memory regions and queue pairs) first.
"""

from __future__ import annotations

import ipaddress
import weakref
from pathlib import Path

from monarch_cy import _rdma
from monarch_cy._errors import VerbsUnavailable
from monarch_cy._resource import Owned

__all__ = ["list_devices", "unavailable_reason", "pick_gid_index", "Context"]

SYSFS = Path("/sys/class/infiniband")


def list_devices() -> list[str]:
    """Names of the verbs devices here; ``[]`` where there are none or verbs are unavailable."""
    try:
        return _rdma.device_names()
    except VerbsUnavailable:
        return []


def unavailable_reason() -> str | None:
    """Why no verbs device can be used here, in a sentence; ``None`` if one can."""
    try:
        names = _rdma.device_names()
    except VerbsUnavailable as e:
        return str(e)
    if not names:
        return ("no RDMA devices: the kernel lists none (no RDMA NIC driver loaded; for soft-RoCE: "
                "`rdma link add rxe0 type rxe netdev <interface>`)")
    return None


def pick_gid_index(device: str, port: int = 1, sysfs: Path = SYSFS) -> int:
    """The GID index to address ``device``'s ``port`` by.

    RoCE ports list several GIDs (link-local IPv6 and each interface address,
    as RoCE v1 and v2).  Prefer RoCE v2 with an IPv4-mapped address (routable,
    what two hosts on one subnet agree on), then any RoCE v2 GID, then the first
    non-zero one; 0 where sysfs says nothing (InfiniBand).
    """
    base = sysfs / device / "ports" / str(port)
    ranked: list[tuple[int, int]] = []
    for gid_file in (base / "gids").glob("*") if (base / "gids").is_dir() else []:
        try:
            index = int(gid_file.name)
            text = gid_file.read_text().strip()
        except (OSError, ValueError):
            continue
        try:
            addr = ipaddress.IPv6Address(text)
        except ValueError:
            continue
        if addr.packed == bytes(16):
            continue
        try:
            gid_type = (base / "gid_attrs" / "types" / str(index)).read_text().strip()
        except OSError:
            gid_type = ""
        v2 = gid_type.lower() == "roce v2"
        rank = 0 if (v2 and addr.ipv4_mapped is not None) else 1 if v2 else 2
        ranked.append((rank, index))
    return min(ranked)[1] if ranked else 0


class Context(Owned):
    """An open verbs device, one port of it in use.

    ``Context()`` opens the first device; ``Context("rxe0", port=1)`` a named
    one.  Raises ``VerbsUnavailable`` with the reason where there is none.
    ``gid_index`` defaults to :func:`pick_gid_index`.
    """

    __slots__ = ("name", "port", "gid_index", "gid", "port_attr", "device_attr", "_ctx",
                 "_children")

    def __init__(self, name: str | None = None, port: int = 1, gid_index: int | None = None):
        super().__init__()
        names = _rdma.device_names()
        if not names:
            raise VerbsUnavailable(unavailable_reason() or "no RDMA devices")
        if name is None:
            name = names[0]
        self._ctx = _rdma.open_device(name)
        self._own(_rdma.close_device, self._ctx)
        self._children: weakref.WeakSet = weakref.WeakSet()
        self.name = name
        self.port = port
        try:
            self.device_attr = _rdma.query_device(self._ctx)
            self.port_attr = _rdma.query_port(self._ctx, port)
            if gid_index is None:
                gid_index = pick_gid_index(name, port)
            self.gid_index = gid_index
            self.gid = _rdma.query_gid(self._ctx, port, gid_index)
        except BaseException:
            self.close()
            raise
        if not self.port_attr["active"]:
            state = self.port_attr["state"]
            self.close()
            raise VerbsUnavailable(f"RDMA device {name!r} port {port} is not active (state {state})")

    @property
    def handle(self) -> int:
        """The ``ibv_context*`` as an int (for :mod:`monarch_cy._rdma`)."""
        self._check_open()
        return self._ctx

    @property
    def rd_atomic(self) -> int:
        """RDMA READs this device keeps in flight per queue pair (capped at 16)."""
        a = self.device_attr
        return max(1, min(16, a["max_qp_rd_atom"], a["max_qp_init_rd_atom"]))

    def _adopt(self, child: Owned) -> None:
        self._children.add(child)

    def _before_close(self) -> None:
        for child in list(self._children):
            child.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"port {self.port}, gid index {self.gid_index}"
        return f"<Context {self.name!r} {state}>"
