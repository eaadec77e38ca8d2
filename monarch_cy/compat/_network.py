"""``monarch.tools.network`` under :mod:`monarch_cy.compat`: resolving a host name to
an address that a TCP socket can use.

``AddrType`` is :class:`monarch_cy.spmd.AddrType` (so a value from here is accepted by
``setup_torch_elastic_env``); it has ``IPv4`` and ``IPv6``, and lacks Monarch's
``Default``, for which ``None`` stands here.  ``get_ipaddr(host, port, addr_type)``
returns the first address of ``host`` of that family that is not link-local
(``None``: IPv6, then IPv4),
``get_sockaddr(host, port)`` the socket address ``"[v6]:port"`` or ``"v4:port"``;
both raise ``RuntimeError`` when nothing resolves.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import Optional

from monarch_cy._spmd import AddrType

__all__ = ["AddrType", "get_ipaddr", "get_sockaddr"]

logger = logging.getLogger("monarch_cy.compat.network")

_FAMILIES = {AddrType.IPv4: (socket.AF_INET,), AddrType.IPv6: (socket.AF_INET6,),
             None: (socket.AF_INET6, socket.AF_INET)}


def _resolve_ipaddr(hostname: str, port: int, family) -> Optional[str]:
    try:
        infos = socket.getaddrinfo(hostname, port, family, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        logger.info("no %s address for %s:%d (%s)", family.name, hostname, port, e)
        return None
    if not infos:
        return None
    addr = str(infos[0][4][0])
    if ipaddress.ip_address(addr.split("%", 1)[0]).is_link_local:
        logger.info("skipping link-local address %s of %s", addr, hostname)
        return None
    return addr


def _unresolved(hostname: str) -> RuntimeError:
    return RuntimeError(f"Unable to resolve `{hostname}` to ipv6 or ipv4 address that "
                        "can bind TCP socket. Check the network configuration on the host.")


def get_ipaddr(hostname: str, port: int, addr_type: AddrType | None = None) -> str:
    """The first usable address of ``hostname`` of the families ``addr_type`` allows
    (IPv6 before IPv4 for None, Monarch's ``AddrType.Default``)."""
    families = _FAMILIES.get(addr_type)
    if families is None:
        raise ValueError(f"Unknown AddrType: {addr_type!r}")
    for family in families:
        addr = _resolve_ipaddr(hostname, port, family)
        if addr:
            return addr
    raise _unresolved(hostname)


def get_sockaddr(hostname: str, port: int) -> str:
    """``"[ipv6]:port"``, else ``"ipv4:port"``, for ``hostname``."""
    for family in (socket.AF_INET6, socket.AF_INET):
        addr = _resolve_ipaddr(hostname, port, family)
        if addr:
            return f"[{addr}]:{port}" if family == socket.AF_INET6 else f"{addr}:{port}"
    raise _unresolved(hostname)
