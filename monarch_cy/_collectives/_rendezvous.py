"""How the ranks of a new group find each other: a unique id (NCCL) or an address (gloo).

The controller asks one rank (or itself, on a machine with NCCL) for the
rendezvous, sends the same picklable value to every rank, and each rank calls
``make_group(backend, rank, world_size, rendezvous)``.

* :class:`UniqueId`: NCCL/RCCL's 128-byte id.  ``UniqueId.generate()`` asks the
  library (``ncclGetUniqueId``); it embeds the address of a bootstrap listener
  in the generating process, which must stay alive until every rank joined.
* :class:`TcpRendezvous`: ``(host, port)`` of the store rank 0 will listen on
  (gloo); :func:`pick_free_port` picks a port that was free a moment ago.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from monarch_cy._checks import is_int

__all__ = ["UniqueId", "TcpRendezvous", "pick_free_port", "UNIQUE_ID_BYTES"]

UNIQUE_ID_BYTES = 128


class UniqueId:
    """Exactly 128 opaque bytes; immutable, hashable, picklable, comparable."""

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes | bytearray | memoryview) -> None:
        if isinstance(raw, UniqueId):
            raw = raw.raw
        if not isinstance(raw, (bytes, bytearray, memoryview)):
            raise TypeError(f"raw must be {UNIQUE_ID_BYTES} bytes, got {type(raw).__name__}")
        raw = bytes(raw)
        if len(raw) != UNIQUE_ID_BYTES:
            raise ValueError(f"raw must be exactly {UNIQUE_ID_BYTES} bytes, got {len(raw)}")
        object.__setattr__(self, "_raw", raw)

    def __setattr__(self, name, value):
        raise AttributeError("UniqueId is immutable")

    @classmethod
    def generate(cls) -> "UniqueId":
        """A fresh id from the bound NCCL/RCCL (loads it on first use)."""
        from monarch_cy import _nccl_shim
        from monarch_cy._collectives._nccl_loader import ensure_loaded

        ensure_loaded()
        return cls(_nccl_shim.getUniqueId())

    @classmethod
    def from_hex(cls, text: str) -> "UniqueId":
        if not isinstance(text, str):
            raise TypeError(f"text must be a hex str, got {type(text).__name__}")
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raise ValueError(f"text must be {2 * UNIQUE_ID_BYTES} hex digits, got {text[:16]!r}...") from None
        return cls(raw)

    @property
    def raw(self) -> bytes:
        return self._raw

    def hex(self) -> str:
        return self._raw.hex()

    def __bytes__(self) -> bytes:
        return self._raw

    def __eq__(self, other) -> bool:
        return isinstance(other, UniqueId) and other._raw == self._raw

    def __hash__(self) -> int:
        return hash(self._raw)

    def __reduce__(self):
        return (UniqueId, (self._raw,))

    def __repr__(self) -> str:
        return f"UniqueId({self._raw[:8].hex()}...)"


@dataclass(frozen=True)
class TcpRendezvous:
    """Where rank 0's store listens: ``host`` (name or address) and ``port`` (1..65535)."""

    host: str
    port: int

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            raise ValueError(f"host must be a non-empty str, got {self.host!r}")
        if not is_int(self.port) or not 0 < self.port < 65536:
            raise ValueError(f"port must be an int in 1..65535, got {self.port!r}")


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free when asked (the OS picks it).

    Another process may take it before it is used: callers that can retry
    should.  Raises ``OSError`` when ``host`` is not an address of this machine.
    """
    if not isinstance(host, str) or not host:
        raise ValueError(f"host must be a non-empty str, got {host!r}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
