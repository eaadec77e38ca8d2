"""Monarch's channel transports as configuration values: ``ChannelTransport`` and
``BindSpec`` (``monarch._rust_bindings.monarch_hyperactor.channel``).

A :class:`BindSpec` says where a process listens: *any* address of one transport
(``BindSpec(ChannelTransport.Unix)``, ``BindSpec("tcp")``) or one address
(``BindSpec("tcp://127.0.0.1:8080")``).  It is the value of the ``default_transport``
configuration key (:mod:`monarch_cy._config_api`), whatever form the key was set in,
so that ``get_global_config()["default_transport"] == BindSpec(ChannelTransport.Unix)``
as in Monarch.  Two specs are equal when they name the same thing; a spec is
immutable, hashable and picklable.

The forms accepted are Monarch's:

* a :class:`ChannelTransport`, or another ``BindSpec`` (copied);
* a transport word: ``"tcp"`` (``TcpWithHostname``), ``"unix"``, ``"local"``,
  ``"tls"``, ``"quic"``;
* an address: ``tcp://IP:PORT`` (an IPv4 or bracketed IPv6 literal, or
  ``localhost``; ``tcp:IP:PORT`` too), ``ipc:///path``, ``ipc://@name`` (abstract),
  ``ipc://`` (any unix address), ``unix:PATH``, and ``tls://``, ``metatls://``,
  ``quic://`` followed by ``HOST:PORT``.

Anything else is a ``ValueError`` quoting it (a str) or a ``TypeError`` (another
type).  Which of these monarch_cy's runtime can use is decided by
:mod:`monarch_cy._config_api` (``MONARCH_CY_TRANSPORT``).

Imports only the standard library.
"""

from __future__ import annotations

import enum
import ipaddress

__all__ = ["BindSpec", "ChannelTransport"]


class ChannelTransport(enum.Enum):
    """Monarch's channel transports (``default_transport``).  monarch_cy honours
    ``Unix`` and the two ``Tcp`` kinds (``MONARCH_CY_TRANSPORT``); the others are
    accepted and recorded only."""

    TcpWithLocalhost = "tcp(localhost)"
    TcpWithHostname = "tcp(hostname)"
    MetaTlsWithHostname = "metatls(hostname)"
    MetaTlsWithIpV6 = "metatls(ipv6)"
    MetaQuicWithHostname = "metaquic(hostname)"
    MetaQuicWithIpV6 = "metaquic(ipv6)"
    Quic = "quic"
    Tls = "tls"
    Local = "local"
    Unix = "unix"


#: How Monarch prints "any address of this transport".
_ANY_TEXT = {
    ChannelTransport.TcpWithLocalhost: "tcp(Localhost)",
    ChannelTransport.TcpWithHostname: "tcp(Hostname)",
    ChannelTransport.MetaTlsWithHostname: "metatls(Hostname)",
    ChannelTransport.MetaTlsWithIpV6: "metatls(IpV6)",
    ChannelTransport.MetaQuicWithHostname: "metaquic(Hostname)",
    ChannelTransport.MetaQuicWithIpV6: "metaquic(IpV6)",
    ChannelTransport.Quic: "quic", ChannelTransport.Tls: "tls",
    ChannelTransport.Local: "local", ChannelTransport.Unix: "unix",
}

_WORDS = {"tcp": ChannelTransport.TcpWithHostname, "unix": ChannelTransport.Unix,
          "local": ChannelTransport.Local, "tls": ChannelTransport.Tls,
          "quic": ChannelTransport.Quic}


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise ValueError(text)
    return int(text)


def _host_port(rest: str) -> tuple:
    """``HOST:PORT`` -> ``(host, port)``; ``ValueError`` when malformed."""
    host, sep, port = rest.rpartition(":")
    if not sep or not host:
        raise ValueError(rest)
    return host, _port(port)


def _tcp(rest: str) -> str:
    """``IP:PORT`` as Monarch prints it (``127.0.0.1:80``, ``[::1]:80``)."""
    host, port = _host_port(rest)
    if host == "localhost":
        host = "127.0.0.1"
    if host.startswith("[") and host.endswith("]"):
        ip = ipaddress.IPv6Address(host[1:-1])         # ValueError when not one
        return f"[{ip.compressed}]:{port}"
    return f"{ipaddress.IPv4Address(host)}:{port}"


def _parse_address(text: str) -> tuple:
    """``(kind, normalized address)`` of an address string, or ``ValueError``."""
    scheme, sep, rest = text.partition("://")
    if sep:
        if scheme == "tcp":
            return "tcp", _tcp(rest)
        if scheme == "ipc":
            if rest == "":
                return "any", ChannelTransport.Unix
            return "unix", rest
        if scheme in ("tls", "metatls", "quic"):
            host, port = _host_port(rest)
            return scheme, f"{host}:{port}"
        if scheme == "unix":
            return "unix", "//" + rest
        raise ValueError(text)
    scheme, sep, rest = text.partition(":")
    if sep and scheme == "tcp":
        return "tcp", _tcp(rest)
    if sep and scheme == "unix" and rest:
        return "unix", rest
    raise ValueError(text)


class BindSpec:
    """Where to listen: any address of a transport, or one address (see the module
    docstring).  ``BindSpec(spec)`` with ``spec`` a :class:`ChannelTransport`, a
    ``BindSpec`` or a str."""

    __slots__ = ("_kind", "_value", "_source")

    def __init__(self, spec) -> None:
        if isinstance(spec, BindSpec):
            kind, value, source = spec._kind, spec._value, spec._source
        elif isinstance(spec, ChannelTransport):
            kind, value, source = "any", spec, spec
        elif isinstance(spec, str):
            source = spec
            if spec in _WORDS:
                kind, value = "any", _WORDS[spec]
            else:
                try:
                    kind, value = _parse_address(spec)
                except ValueError:
                    raise ValueError(f"invalid str for BindSpec {spec!r}: not a transport "
                                     f"({', '.join(_WORDS)}) or an address such as "
                                     "'tcp://127.0.0.1:8080', 'ipc:///path' or "
                                     "'ipc://@name'") from None
        else:
            raise TypeError(f"expected ChannelTransport enum, BindSpec, or str, not "
                            f"{spec!r}")
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_value", value)
        object.__setattr__(self, "_source", source)

    def __setattr__(self, name, value):
        raise AttributeError(f"BindSpec is immutable (cannot set {name!r})")

    @property
    def transport(self) -> ChannelTransport | None:
        """The transport when this spec is *any* address of one, else None."""
        return self._value if self._kind == "any" else None

    @property
    def address(self) -> str | None:
        """``"kind:address"`` when this spec is one address (``"tcp:127.0.0.1:80"``,
        ``"unix:/tmp/s"``, ``"unix:@name"``), else None."""
        return None if self._kind == "any" else f"{self._kind}:{self._value}"

    def __eq__(self, other):
        if not isinstance(other, BindSpec):
            return NotImplemented
        return (self._kind, self._value) == (other._kind, other._value)

    def __hash__(self):
        return hash((self._kind, self._value))

    def __str__(self) -> str:
        return _ANY_TEXT[self._value] if self._kind == "any" else self.address

    def __repr__(self) -> str:
        src = self._source
        return f"BindSpec({src if isinstance(src, ChannelTransport) else repr(src)})"

    def __reduce__(self):
        return (BindSpec, (self._source,))
