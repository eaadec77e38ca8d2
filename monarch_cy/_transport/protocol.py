"""The message protocol: every message kind, and the one frame-header pack/unpack.

Two kinds of first frame travel between processes, both laid out the same way:

    u16 little-endian header length  (bit 15 set by the sender when more frames follow)
    pickled header tuple             (protocol 5)
    payload                          (a pickle stream, see :mod:`.wire`; may be empty)

* **Node messages** go to a process's inbox; the header's first item is the *kind*
  (below) and the rest is kind-specific.  The node handles REPLY, RELEASE and
  PROC_DEAD itself; every other kind goes to the handler the actor model registered
  in ``node.handlers[kind]``.
* **Actor calls** go to one actor's socket; the header is
  ``(method, reply address, port id, rank in the call, reply key, extent)`` where
  ``extent`` is None (the whole mesh) or the pickled ``(labels, sizes)`` of the slice
  the caller sent to (unpickled only if the actor asks ``message_rank``).

Headers must stay under 32 KiB (the u16 with its top bit reserved): :func:`pack`
and :func:`pack_call` refuse larger ones with ``ValueError``.  Nothing here is
unpickled before the connection carrying it was authenticated (:mod:`.auth`).

This module imports only :mod:`pickle`: the public API may import it without
starting (or importing) the transport.
"""

from __future__ import annotations

import pickle

__all__ = ["REPLY", "RELEASE", "PROC_DEAD", "SPAWN", "STOP", "CALL", "WAKE",
           "HEARTBEAT", "HEARTBEAT_ACK", "SUPERVISE", "REVIVE", "SEEN", "UNDELIVERABLE",
           "MESH_CTL",
           "CC_ENSURE", "CAST", "REPLY_BATCH", "REPLY_PARTIAL", "HB_TREE", "SPAWN_TREE",
           "STOP_TREE", "SUPERVISE_ACTOR",
           "MAX_HEADER", "pack", "unpack", "pack_call", "unpack_call",
           "PENDING", "buf"]

# -- node message kinds (first item of the header) -----------------------------
REPLY = 0          # (REPLY, port id, rank, ok) + the value or error: to a waiting port
RELEASE = 2        # (RELEASE, receiver key, [segments]): shm segments it is done with
PROC_DEAD = 3      # (PROC_DEAD, proc key, cause[, addrs]): fail what waits on that proc
SPAWN = 4          # (SPAWN, name, addr, rank, labels, sizes, proc rank, owner) + class
STOP = 5           # (STOP[, addrs already sent __stop__]): the proc stops
CALL = 6           # reserved
WAKE = 7           # ignored: wakes a blocked reader
HEARTBEAT = 16     # controller -> proc: are you alive
HEARTBEAT_ACK = 17  # proc -> controller
SUPERVISE = 18     # an unhandled failure, reported to the controller
REVIVE = 19        # (REVIVE, proc key): that proc was respawned, calls reach it again
SEEN = 20          # (SEEN, actor addr): a caller has observed that actor's failure
UNDELIVERABLE = 21  # (UNDELIVERABLE, port id, endpoint, dest, why, data len): to a
#                    caller, before the error reply, when its call reached an actor
#                    that had already failed or stopped (Monarch bounces the message)
MESH_CTL = 22      # (MESH_CTL, op, mesh id, reply addr, port id, reply key): mesh views
CC_ENSURE = 23     # get_or_spawn_controller's registry
CAST = 24          # (CAST, method, reply addr, port id, reply key, extent, mode) +
#                    payload; frame 1: this hop's route, frame 2 with mode REDUCE the
#                    fold (monarch_cy._actor.cast.tree, .reduce)
REPLY_BATCH = 25   # (REPLY_BATCH, port id) + pickled [(rank, ok, pickled value)]: replies
#                    a cast-tree forwarder gathered from its subtree
REPLY_PARTIAL = 26  # (REPLY_PARTIAL, port id, [call ranks]) + the encoded fold of those
#                    ranks' replies (an Accumulator with merge=, folded on the way up)
HB_TREE = 27       # (HB_TREE, answer addr, port id, key, relay life s); frame 1: the
#                    route: a heartbeat down the tree (monarch_cy._actor.cast.heartbeat)
SPAWN_TREE = 28    # (SPAWN_TREE, name, labels, sizes, owner) + (cls, args, kwargs);
#                    frame 1: the route (monarch_cy._actor.cast.spawn)
STOP_TREE = 29     # (STOP_TREE,); frame 1: the route (monarch_cy._actor.cast.stop)
SUPERVISE_ACTOR = 30  # (SUPERVISE_ACTOR, actor addr, reply addr, port id, reply key) +
#                    a pickled MeshFailure: a child's failure, for that actor of the
#                    receiving process; answered (port id 0: not) once queued for it

MAX_HEADER = 0x7FFF

# The value of a reply slot not yet filled (``Future._value``); the pump's waiters
# wait while a future's ``_value`` is this object.
PENDING = object()

_dumps = pickle.dumps
_loads = pickle.loads


def _too_large(n: int):
    return ValueError(f"message header too large ({n} bytes; at most {MAX_HEADER})")


def pack(hdr: tuple, data=b"") -> bytes:
    """First frame of a node message (``hdr[0]`` is its kind); bit 15 of the length
    is left clear (the sender sets it when more frames follow)."""
    h = _dumps(hdr, 5)
    if len(h) > MAX_HEADER:
        raise _too_large(len(h))
    return len(h).to_bytes(2, "little") + h + data


def unpack(f0) -> tuple:
    """``(header tuple, payload memoryview)`` of a first frame (either kind)."""
    n = f0[0] | ((f0[1] & 0x7F) << 8)
    mv = memoryview(f0)
    return _loads(mv[2:2 + n]), mv[2 + n:]


def pack_call(method: str, reply_addr: str, port_id: int, rank: int, reply_key,
              extent, data=b"") -> bytes:
    """First frame of a call to an actor (see the module docstring).  On the hot
    path of every call: one function, no helper calls."""
    h = _dumps((method, reply_addr, port_id, rank, reply_key, extent), 5)
    if len(h) > MAX_HEADER:
        raise _too_large(len(h))
    return len(h).to_bytes(2, "little") + h + data


unpack_call = unpack


def buf(frame):
    """The bytes-like payload of a received frame: a zmq ``Frame``'s buffer, or the
    frame itself (``bytes``/``memoryview`` from a unix inbox or a test)."""
    return frame.buffer if hasattr(frame, "buffer") else frame
