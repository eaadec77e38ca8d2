"""Wire format of the ``unix://`` transport (:mod:`.unixsock`): addresses and their
incarnations, the connection proof, and how messages become seqpacket records.

Address: ``unix://PATH``.  ``PATH`` is a symbolic link to the socket of the inbox's
current *incarnation*, a sibling named ``BASENAME.TOKEN`` (``TOKEN``: 11 characters,
64 random bits drawn when the inbox binds); a respawned proc binds a new name and
swaps the link.  Senders :func:`resolve` the link at every connect and connect to the
name it gives.  (The socket's own path is 12 characters longer than ``PATH``: it must
fit ``sun_path``, 107 bytes.)

Proof: the first record on every connection is ``3 | nonce(16) |
HMAC-SHA256(job secret, tag | PATH | "|" | incarnation name | "|" | nonce)``.

Records (first byte is the kind):

* ``0`` one frame: the rest of the record;
* ``1`` several frames: ``u16 count``, ``count x u32 length``, then the frames;
* ``2`` spilled: ``u16 count``, ``count x u64 length``; the frames are in a memfd
  passed with the record (``SCM_RIGHTS``), used when the message is larger than
  :data:`MAX_RECORD` (or has more frames than one ``sendmsg`` takes).  The receiver
  maps it privately (copy-on-write); its frames are views of that mapping, freed when
  the last view goes.
* ``4`` a batch of one-frame messages: ``u16 count`` (at least 2), ``count x u32
  length``, then the messages.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import struct

__all__ = ["SCHEME", "MAX_RECORD", "Again", "Closed", "path_of", "new_incarnation",
           "is_incarnation_of", "link_incarnation", "unlink_quietly", "resolve", "remove_inbox", "proof", "proof_record", "record", "records",
           "discard", "split"]


SCHEME = "unix://"
MAX_RECORD = 60 * 1024             # larger messages are spilled to a memfd
_TAG = b"monarch_cy unix v2|"
_NONCE = 16
_PROOF_LEN = 1 + _NONCE + 32
_SNDBUF = 4 << 20                   # capped by the kernel's wmem_max
_ONE, _MANY, _SPILL, _PROOF, _BATCH = 0, 1, 2, 3, 4
_RETRY_FAST, _FAST_TRIES, _RETRY_SLOW = 0.001, 2000, 0.05   # connect retries
_MAX_IOV = 1000                    # buffers per sendmsg (the kernel's IOV_MAX is 1024)
_B_ONE = bytes((_ONE,))


class Again(Exception):
    """Nothing to receive within the timeout (the socket stays usable)."""


class Closed(Exception):
    """The inbox was closed (or interrupted for closing)."""


def path_of(addr: str) -> str:
    if not addr.startswith(SCHEME):
        raise ValueError(f"not a {SCHEME} address: {addr!r}")
    return addr[len(SCHEME):]


def new_incarnation(path: str) -> str:
    """A fresh incarnation name for the inbox at ``path`` (see the module docstring)."""
    token = base64.urlsafe_b64encode(os.urandom(8)).rstrip(b"=").decode()
    return f"{os.path.basename(path)}.{token}"


def is_incarnation_of(path: str, name: str) -> bool:
    """Whether ``name`` has the form of an incarnation name of ``path``."""
    base = os.path.basename(path)
    return len(name) == len(base) + 12 and name.startswith(base + ".") and "/" not in name


def unlink_quietly(path: str) -> None:
    """Remove ``path`` if it is there (a missing or unremovable file is not an error)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def link_incarnation(path: str, target: str, incarnation: str) -> None:
    """Point the inbox link ``path`` at ``incarnation`` (the socket bound at
    ``target``), atomically, and remove the socket file of the incarnation it pointed
    at before (a respawned proc's predecessor)."""
    tmp = target + ".link"
    os.symlink(incarnation, tmp)
    try:
        old = os.readlink(path)
    except OSError:
        old = None
    try:
        os.replace(tmp, path)
    except BaseException:
        unlink_quietly(tmp)
        raise
    if old is not None and old != incarnation and is_incarnation_of(path, old):
        unlink_quietly(os.path.join(os.path.dirname(path), old))


def resolve(path: str) -> tuple:
    """``(socket path, incarnation name)`` of the inbox at ``path`` now; ``OSError``
    when there is none (not bound yet, closed, or not an inbox's link)."""
    name = os.readlink(path)
    return os.path.join(os.path.dirname(path), name), name


def remove_inbox(path: str) -> None:
    """Remove what the inbox bound at ``path`` left on the file system once its
    process exited for good (no later incarnation will bind ``path``): the link and
    the incarnation's socket it points at.  A path that is not an inbox's link is
    left alone; missing files are no error."""
    try:
        name = os.readlink(path)
    except OSError:
        return
    if is_incarnation_of(path, name):
        for f in (os.path.join(os.path.dirname(path), name), path):
            try:
                os.unlink(f)
            except OSError:
                pass


def proof(secret: bytes, path: str, incarnation: str, nonce: bytes) -> bytes:
    return hmac.digest(secret, b"%s%s|%s|%s" % (_TAG, path.encode(), incarnation.encode(),
                                                 nonce), hashlib.sha256)


def proof_record(secret: bytes, path: str, incarnation: str, nonce: bytes | None = None
                 ) -> bytes:
    """The first record of a connection to incarnation ``incarnation`` of ``path``."""
    if nonce is None:
        nonce = os.urandom(_NONCE)
    return bytes((_PROOF,)) + nonce + proof(secret, path, incarnation, nonce)



def split(data, lens) -> list:
    mv = memoryview(data)
    out, pos = [], 0
    for ln in lens:
        out.append(mv[pos:pos + ln])
        pos += ln
    if pos != len(mv):
        raise ValueError("frame lengths do not add up")
    out[0] = bytes(out[0])
    return out


def record(frames) -> tuple:
    """``(buffers, memfd or -1)`` for one message (see the module docstring)."""
    if len(frames) == 1:
        f = frames[0]
        if len(f) < MAX_RECORD:
            return [_B_ONE, f], -1
    views = [memoryview(f).cast("B") for f in frames]
    lens = [v.nbytes for v in views]
    k = len(views)
    if k > 0xFFFF:
        raise ValueError(f"too many frames in one message ({k})")
    if sum(lens) + 3 + 4 * k <= MAX_RECORD and k < _MAX_IOV:
        return [bytes((_MANY, k & 0xFF, k >> 8)) + struct.pack(f"<{k}I", *lens), *views], -1
    hdr = bytes((_SPILL, k & 0xFF, k >> 8)) + struct.pack(f"<{k}Q", *lens)
    if len(hdr) > MAX_RECORD:
        raise ValueError(f"too many frames in one message ({k})")
    fd = os.memfd_create("monarch_cy-msg", os.MFD_CLOEXEC)
    try:
        for v in views:
            pos = 0
            while pos < v.nbytes:
                pos += os.write(fd, v[pos:pos + (1 << 30)])
    except OSError as e:
        os.close(fd)
        raise MemoryError(f"cannot hold a {sum(lens)}-byte message in memory to send "
                          f"it: {e}") from None
    except BaseException:
        os.close(fd)
        raise
    return [hdr], fd


def records(msgs) -> list:
    """Records for ``msgs`` (lists of frames), in order: runs of small one-frame
    messages share ``_BATCH`` records."""
    out, run, size = [], [], 3

    def close_run():
        if len(run) == 1:
            out.append(([_B_ONE, run[0]], -1))
        elif run:
            k = len(run)
            out.append(([bytes((_BATCH, k & 0xFF, k >> 8)) +
                         struct.pack(f"<{k}I", *map(len, run)), *run], -1))
        run.clear()

    for frames in msgs:
        if len(frames) == 1 and len(frames[0]) + 4 + 3 <= MAX_RECORD:
            f = frames[0]
            if size + len(f) + 4 > MAX_RECORD or len(run) == _MAX_IOV - 1:
                close_run()
                size = 3
            run.append(f)
            size += len(f) + 4
        else:
            close_run()
            size = 3
            out.append(record(frames))
    close_run()
    return out


def discard(rec) -> None:
    if rec[1] >= 0:
        os.close(rec[1])

