"""Log forwarding: workers' ``sys.stdout``/``sys.stderr`` (and so ``logging``, whose
stream handlers write there) reach the controller, one LOG message per batch of
complete lines, prefixed there with the actor name and rank: ``[trainer 3] text``.
Output outside any actor is prefixed ``[proc <rank>]``.

LOG messages go to the controller's background inbox (pumped by its I/O thread), so
lines appear promptly even when nobody waits on a call; their order relative to a
call's result (which may come back on the caller's direct inbox) is not guaranteed.

Controller side, per proc mesh (``ProcMesh.logging_option``):
``stream_to_client=False`` drops the lines; ``aggregate_window_sec=w`` collects
lines for ``w`` seconds and prints each distinct text once,
``[name ranks 0-3] text`` (with the count of ranks that printed it).
Output written to file descriptors 1/2 directly (C code, subprocesses) is not
captured; it goes to the controller's terminal unprefixed.
"""

from __future__ import annotations

import io
import sys
import threading
import time

from monarch_cy._actor.base import state as _state
from monarch_cy._transport.protocol import LOG, pack

__all__ = ["install_forwarding", "LogSink", "handle_log"]


class _Forward(io.TextIOBase):
    """A text stream whose complete lines become LOG messages to the controller."""

    def __init__(self, node, controller: str, stream: str, mesh_id: int, proc_rank: int):
        self._node, self._ctl, self._stream = node, controller, stream
        self._mesh_id, self._proc_rank = mesh_id, proc_rank
        self._bufs = {}

    def writable(self):
        return True

    @property
    def encoding(self):
        return "utf-8"

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        tid = threading.get_ident()
        buf = self._bufs.get(tid, "") + s
        if "\n" in buf:
            done, _, rest = buf.rpartition("\n")
            self._bufs[tid] = rest
            self._emit(done)
        else:
            self._bufs[tid] = buf
        return len(s)

    def flush(self) -> None:
        for tid, buf in list(self._bufs.items()):
            if buf:
                self._bufs[tid] = ""
                self._emit(buf)

    def _emit(self, text: str) -> None:
        inst = getattr(_state.local, "instance", None)
        who, rank = (inst.name, inst.rank.rank) if inst is not None else \
            ("proc", self._proc_rank)
        try:
            self._node.send(self._ctl, [pack(
                (LOG, self._stream, who, rank, self._mesh_id, text))])
        except Exception:
            pass

    def isatty(self):
        return False

    def fileno(self):
        return 1 if self._stream == "stdout" else 2


def install_forwarding(node, controller: str, mesh_id: int, proc_rank: int) -> None:
    sys.stdout = _Forward(node, controller, "stdout", mesh_id, proc_rank)
    sys.stderr = _Forward(node, controller, "stderr", mesh_id, proc_rank)


class LogSink:
    """Controller side: prints forwarded lines, optionally aggregated per mesh."""

    def __init__(self, node) -> None:
        self.node = node
        self.options = {}      # mesh id -> (stream_to_client, window or None)
        self._pending = {}     # (mesh, stream, who, text) -> [ranks]
        self._flush_at = None

    def handle(self, node, hdr, data, extras) -> None:
        _, stream, who, rank, mesh_id, text = hdr
        to_client, window = self.options.get(mesh_id, (True, None))
        if not to_client:
            return
        if window:
            for line in text.split("\n"):
                self._pending.setdefault((mesh_id, stream, who, line), []).append(rank)
            if self._flush_at is None:
                self._flush_at = time.monotonic() + window
                node.add_timer(window, self.flush)
            return
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.write("".join(f"[{who} {rank}] {line}\n" for line in text.split("\n")))
        out.flush()

    def flush(self) -> None:
        """Print aggregated lines now (runs in the pump)."""
        self._flush_at = None
        pending, self._pending = self._pending, {}
        for (mesh_id, stream, who, line), ranks in pending.items():
            out = sys.stdout if stream == "stdout" else sys.stderr
            if len(ranks) == 1:
                out.write(f"[{who} {ranks[0]}] {line}\n")
            else:
                out.write(f"[{who} ranks {_ranges(sorted(set(ranks)))}] "
                          f"[{len(ranks)} similar lines] {line}\n")
            out.flush()


def _ranges(ranks) -> str:
    parts, start, prev = [], None, None
    for r in ranks:
        if start is None:
            start = prev = r
        elif r == prev + 1:
            prev = r
        else:
            parts.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = r
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(parts)


def handle_log(node, hdr, data, extras) -> None:
    """``LOG`` in the controller: to this process's sink (made with its node)."""
    _state.log_sink().handle(node, hdr, data, extras)
