"""``enable_transport``: choose the transport before the runtime starts (Monarch's).

monarch_cy has two transports between the processes of one host
(``MONARCH_CY_TRANSPORT``, :mod:`monarch_cy._config`): ``unix`` (AF_UNIX) and ``tcp``
(loopback).  Monarch's names map onto them:

* ``ChannelTransport.Unix``, ``"ipc"`` (Monarch's shortcut for it), ``"unix"``,
  ``"unix://..."``, ``"ipc://..."`` -> ``unix``;
* ``ChannelTransport.TcpWithLocalhost``, ``ChannelTransport.TcpWithHostname``,
  ``"tcp"``, ``"tcp://host:port"`` -> ``tcp`` (an explicit address is not bound
  as given: the runtime picks its own ports).

Any other transport (TLS, MetaTLS, QUIC, Local...) is a ``ValueError`` naming it and
the ones that work.  The choice is this process's runtime override of
``MONARCH_CY_TRANSPORT`` (and ``monarch.config``'s ``default_transport``), so it
must come before the runtime starts (the controller's node is made on first use of
a mesh): afterwards re-enabling the transport in use is a no-op and another one is
Monarch's ``RuntimeError``.  As in Monarch, only one transport may be enabled: a
second, different call before the start is a ``RuntimeError`` too.
"""

from __future__ import annotations

import threading

from monarch_cy import _config
from monarch_cy._transport.current import current_node

__all__ = ["enable_transport"]

_VAR = "MONARCH_CY_TRANSPORT"
_lock = threading.Lock()
_enabled = None          # (what the caller passed, its MONARCH_CY_TRANSPORT value)

_SUPPORTED = ("ChannelTransport.Unix (or 'ipc', 'unix', 'unix://...', 'ipc://...'), "
              "ChannelTransport.TcpWithLocalhost, ChannelTransport.TcpWithHostname (or "
              "'tcp', 'tcp://...')")


def _resolve(transport):
    """``(the ChannelTransport or URL recorded, the MONARCH_CY_TRANSPORT value)``."""
    # deferred: import time (the configuration API loads only when a transport is chosen)
    from monarch_cy._config_api import ChannelTransport, _transport_raw
    if isinstance(transport, str):
        shortcut = {"tcp": ChannelTransport.TcpWithHostname,
                    "ipc": ChannelTransport.Unix,
                    "metatls": ChannelTransport.MetaTlsWithIpV6,
                    "metatls-hostname": ChannelTransport.MetaTlsWithHostname,
                    "tls": ChannelTransport.Tls}.get(transport)
        if shortcut is not None:
            transport = shortcut
    elif not isinstance(transport, ChannelTransport):
        raise TypeError(f"transport must be a ChannelTransport or a str, not "
                        f"{transport!r}")
    raw = _transport_raw(transport)
    if raw is None:
        raise ValueError(f"transport {transport!r} is not supported by monarch_cy; use "
                         f"{_SUPPORTED}")
    return transport, raw


def enable_transport(transport) -> None:
    """Use ``transport`` (a ``ChannelTransport`` or a string; see the module
    docstring) for this process's runtime.  Call it before any other call of the
    API."""
    global _enabled
    value, raw = _resolve(transport)
    with _lock:
        if current_node() is not None:     # the runtime has started
            if raw == _config.transport():
                return                     # the transport in use: a no-op
            raise RuntimeError(
                "`enable_transport()` must be called before any other calls in the "
                "monarch API. If it isn't called, we will implicitly call "
                "`monarch.enable_transport(ChannelTransport.Unix)` on the first monarch "
                "call.")
        if _enabled is not None and _enabled[1] != raw:
            raise RuntimeError(
                "Only one transport type may be enabled at one time. Currently enabled "
                f"transport type is `{_enabled[0]}`. Attempted to enable transport type "
                f"`{value}`.")
        # deferred: import time (see _resolve)
        from monarch_cy import _config_api
        _config_api.configure(default_transport=value)   # sets the override too
        if _config.overrides().get(_VAR) != raw:
            _config.set_override(_VAR, raw)
        _enabled = (value, raw)


def _reset_for_tests() -> None:
    """Forget the enabled transport and its override (tests only)."""
    global _enabled
    with _lock:
        _enabled = None
        _config.clear_override(_VAR)
