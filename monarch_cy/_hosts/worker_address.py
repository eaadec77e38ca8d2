"""Worker addresses: what a worker loop listens on and what a controller dials.

Monarch's forms, all accepted by ``run_worker_loop_forever(address=...)``:

* ``tcp://HOST:PORT``: listen there (HOST: this host's address as controllers dial
  it; its procs bind it too);
* ``tcp://ADVERTISED:PORT@tcp://BIND:PORT``: listen on BIND (e.g. ``0.0.0.0``),
  advertise ADVERTISED (the ports must agree);
* ``tcp://HOST:fdN``: serve on the listening socket this process inherited as file
  descriptor N (bound by whoever started it; the controller dials its real port);
* ``ipc:///PATH`` (or ``ipc://PATH``): a Unix socket at PATH, on this machine only;
  its procs then bind loopback ports;
* any of these behind a Monarch proc id (``service<...>@``), which is ignored.

``attach_to_workers(workers=...)`` takes the same forms except ``fdN``; an alias is
dialed at its advertised address.  A wildcard host (``tcp://*:PORT``) raises
``NotImplementedError`` as in Monarch; another scheme (``metatls://``, ``udp://``) or
a malformed address raises ``ValueError`` naming the value and the forms above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from monarch_cy._hosts import protocol as P

__all__ = ["Listen", "listen_spec", "dial_endpoint", "is_local_endpoint",
           "endpoint_ip", "FORMS"]

FORMS = ("'tcp://HOST:PORT', 'tcp://ADVERTISED:PORT@tcp://BIND:PORT', "
         "'tcp://HOST:fdN' or 'ipc:///PATH'")
_PROC_ID = re.compile(r"^[A-Za-z_][\w.\-]*(<[^<>@]*>)?@(?=[a-z][a-z0-9+.\-]*://)")
_FD = re.compile(r"^tcp://(.+):fd(\d+)$")
_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*)://")


@dataclass(frozen=True)
class Listen:
    """How a worker loop listens: ``bind`` (a zmq endpoint, ``tcp://HOST:PORT`` or
    ``ipc://PATH``), ``advertise`` (the address procs bind and controllers reach;
    None: the one controllers dialed), ``fd`` (an inherited listening socket)."""

    bind: str
    advertise: str | None = None
    fd: int | None = None


def _bad(address, what: str, why: str) -> ValueError:
    # Monarch's opening words ('invalid worker address "udp://h:1": unsupported ZMQ
    # scheme: udp'), then the forms that are accepted
    return ValueError(f'invalid {what} "{address}": {why}; a worker address looks like '
                      f"{FORMS}")


def _strip(address, what: str) -> str:
    if not isinstance(address, str):
        raise TypeError(f"{what} must be a str like 'tcp://host:port', not {address!r}")
    a = _PROC_ID.sub("", address.strip(), count=1)
    if "tcp://*" in a:
        raise NotImplementedError(
            f"{what} {address!r}: a wildcard host is not supported (as in Monarch); "
            "give this host's address, or bind all interfaces with "
            "'tcp://HOST:PORT@tcp://0.0.0.0:PORT'")
    return a


def _one(part: str, address, what: str) -> str:
    """Check one ``tcp://`` or ``ipc://`` part; returns it."""
    m = _SCHEME.match(part)
    if m is None:
        raise _bad(address, what, "no scheme")
    scheme = m.group(1)
    if scheme == "ipc":
        path = part[len("ipc://"):]
        if not path:
            raise _bad(address, what, "an ipc:// address needs a path")
        return part
    if scheme != "tcp":
        raise _bad(address, what, f"unsupported ZMQ scheme: {scheme}")
    try:
        P.parse_tcp(part, what)
    except ValueError:
        raise _bad(address, what, "not HOST:PORT with a port in 1..65535") from None
    return part


def listen_spec(address, what: str = "worker address") -> Listen:
    """:class:`Listen` for a worker loop's ``address`` (module docstring)."""
    a = _strip(address, what)
    m = _FD.match(a)
    if m is not None:
        host, fd = m.group(1).strip("[]"), int(m.group(2))
        if not host:
            raise _bad(address, what, "no host before ':fdN'")
        return Listen(bind=f"tcp://{host}", advertise=None, fd=fd)
    adv, sep, bind = a.partition("@")
    _one(adv, address, what)
    if not sep:
        return Listen(bind=adv)
    _one(bind, address, what)
    if not (adv.startswith("tcp://") and bind.startswith("tcp://")):
        raise _bad(address, what, "an alias joins two tcp:// addresses")
    ahost, aport = P.parse_tcp(adv)
    _, bport = P.parse_tcp(bind)
    if aport != bport:
        raise ValueError(f"{what} {address!r}: the advertised and bound ports differ "
                         f"({aport} and {bport})")
    return Listen(bind=bind, advertise=ahost)


def dial_endpoint(address, what: str = "worker address") -> str:
    """The zmq endpoint a controller connects to for worker ``address``: the address
    itself, an alias's advertised part; ``ValueError`` for the ``fdN`` form (dial the
    socket's real port) and what :func:`listen_spec` refuses."""
    a = _strip(address, what)
    if _FD.match(a):
        raise _bad(address, what, "the fdN form names the worker's inherited socket; "
                                  "dial its real port, tcp://HOST:PORT")
    adv, sep, bind = a.partition("@")
    _one(adv, address, what)
    if sep:
        listen_spec(address, what)        # the whole alias checked
    return adv


def is_local_endpoint(endpoint: str) -> bool:
    """Whether a dialed endpoint is on this machine: ``ipc://``, or loopback TCP."""
    if endpoint.startswith("ipc://"):
        return True
    return P.is_loopback(P.parse_tcp(endpoint)[0])


def endpoint_ip(endpoint: str) -> str:
    """The IPv4 address behind a dialed endpoint (``127.0.0.1`` for ``ipc://``)."""
    if endpoint.startswith("ipc://"):
        return "127.0.0.1"
    return P.resolve(P.parse_tcp(endpoint)[0])
