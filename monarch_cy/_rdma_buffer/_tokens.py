"""Liveness tokens: one 8-byte cell per registered buffer, readable by other processes.

A registration draws a random non-zero 64-bit token and stores it in a cell of a
process-lifetime arena (cells are never freed, so reading a cell is always safe).
The handle carries the cell's address and the token.  ``drop`` zeroes the cell.

Same-host readers check the cell (one 8-byte cross-memory-attach read) before
they touch the buffer: a zero or different value means the buffer was dropped
(or the pid now names another process), so no read or write ever goes to memory
the owner has given back.
"""

from __future__ import annotations

import ctypes
import os
import threading

__all__ = ["alloc", "clear", "value"]

_ARENA = 1024
_lock = threading.Lock()
_arenas: list = []
_free: list = []


def alloc() -> tuple[int, int]:
    """``(cell address, token)`` of a fresh cell holding a fresh token."""
    with _lock:
        if not _free:
            arena = (ctypes.c_uint64 * _ARENA)()
            _arenas.append(arena)
            base = ctypes.addressof(arena)
            _free.extend(base + 8 * i for i in range(_ARENA - 1, -1, -1))
        addr = _free.pop()
    token = int.from_bytes(os.urandom(8), "little") | 1
    ctypes.c_uint64.from_address(addr).value = token
    return addr, token


def clear(addr: int) -> None:
    """Zero the cell (the buffer is dropped) and recycle it: its next token differs."""
    ctypes.c_uint64.from_address(addr).value = 0
    with _lock:
        _free.insert(0, addr)


def value(addr: int) -> int:
    return ctypes.c_uint64.from_address(addr).value
