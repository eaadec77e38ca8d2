"""Small records two processes exchange to set up one-sided RDMA.

Both are frozen, picklable, and also pack into fixed-size bytes for channels
that carry raw bytes (a pipe, a socket, an actor message's out-of-band part).
Neither carries anything secret beyond what RDMA itself needs; whoever holds a
:class:`RemoteRegion` can read (and write, if registered writable) that memory
through a connected queue pair, so hand them only to peers of the same job.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from monarch_cy._checks import check_int

__all__ = ["QPEndpoint", "RemoteRegion"]

_EP = struct.Struct("!4sIH16sIHB")      # magic, qp_num, lid, gid, psn, mtu, rd_atomic
_RR = struct.Struct("!4sQQI")           # magic, addr, length, rkey
_EP_MAGIC = b"MCQP"
_RR_MAGIC = b"MCMR"


def _check_uint(name: str, value: int, bits: int) -> None:
    value = check_int(name, value)
    if not 0 <= value < (1 << bits):
        raise ValueError(f"{name} must fit in {bits} unsigned bits, got {value!r}")


@dataclass(frozen=True)
class QPEndpoint:
    """Where a reliable-connected queue pair can be reached.

    ``gid`` is 16 bytes (RoCE: the address-derived GID; InfiniBand may use all
    zeros and a LID); ``psn`` is the first packet sequence number the queue pair
    sends; ``mtu`` the port's active MTU in bytes; ``rd_atomic`` how many RDMA
    READs it can have in flight (as initiator and as responder).
    """

    qp_num: int
    lid: int
    gid: bytes
    psn: int
    mtu: int
    rd_atomic: int

    def __post_init__(self) -> None:
        _check_uint("qp_num", self.qp_num, 24)
        _check_uint("lid", self.lid, 16)
        _check_uint("psn", self.psn, 24)
        _check_uint("rd_atomic", self.rd_atomic, 8)
        if self.mtu not in (256, 512, 1024, 2048, 4096):
            raise ValueError(f"mtu must be 256, 512, 1024, 2048 or 4096 bytes, got {self.mtu!r}")
        if not isinstance(self.gid, bytes) or len(self.gid) != 16:
            raise ValueError(f"gid must be 16 bytes, got {self.gid!r}")

    def to_bytes(self) -> bytes:
        return _EP.pack(_EP_MAGIC, self.qp_num, self.lid, self.gid, self.psn, self.mtu,
                        self.rd_atomic)

    @classmethod
    def from_bytes(cls, data: bytes) -> "QPEndpoint":
        if len(data) != _EP.size:
            raise ValueError(f"a QPEndpoint is {_EP.size} bytes, got {len(data)}")
        magic, qp_num, lid, gid, psn, mtu, rd = _EP.unpack(data)
        if magic != _EP_MAGIC:
            raise ValueError(f"not a QPEndpoint record (magic {magic!r})")
        return cls(qp_num, lid, gid, psn, mtu, rd)

    SIZE = _EP.size


@dataclass(frozen=True)
class RemoteRegion:
    """A peer's registered memory: ``length`` bytes at ``addr``, reachable with ``rkey``."""

    addr: int
    length: int
    rkey: int

    def __post_init__(self) -> None:
        _check_uint("addr", self.addr, 64)
        _check_uint("length", self.length, 64)
        _check_uint("rkey", self.rkey, 32)

    def slice(self, offset: int, length: int) -> tuple[int, int]:
        """``(remote_addr, length)`` of ``[offset, offset+length)``, checked against the region."""
        if offset < 0 or length < 1 or offset + length > self.length:
            raise ValueError(
                f"remote range [{offset}, {offset + length}) is outside the {self.length}-byte "
                "remote region")
        return self.addr + offset, length

    def to_bytes(self) -> bytes:
        return _RR.pack(_RR_MAGIC, self.addr, self.length, self.rkey)

    @classmethod
    def from_bytes(cls, data: bytes) -> "RemoteRegion":
        if len(data) != _RR.size:
            raise ValueError(f"a RemoteRegion is {_RR.size} bytes, got {len(data)}")
        magic, addr, length, rkey = _RR.unpack(data)
        if magic != _RR_MAGIC:
            raise ValueError(f"not a RemoteRegion record (magic {magic!r})")
        return cls(addr, length, rkey)

    SIZE = _RR.size
