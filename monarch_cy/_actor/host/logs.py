"""A worker's output, proc side: where ``sys.stdout``/``sys.stderr`` write, and the
actor that sets the proc's logging level.

A proc is started with its fds 1 and 2 on two FIFOs that the controller reads
(:mod:`monarch_cy._actor.launch.proc_output`; the worker's bootstrap puts them in
place before it imports anything).  Everything written there reaches the controller:
C code, child processes (they inherit the fds), ``print``.  ``sys.stdout`` and
``sys.stderr`` become :class:`_FdLines` streams: unbuffered below the line (a line is
one ``write(2)``, so a proc killed right after ``print`` has already handed it to the
kernel, and the controller still reads it), and a line written by an actor's thread
is tagged with that actor (``TAG`` + name + ``SEP`` + rank + ``SEP``), which the
controller strips and prints as the ``[name rank]`` prefix.  Untagged lines are the
proc's (``[proc <rank>]``).

A proc on another host has the same two FIFOs on its host; its agent reads them
and sends the bytes to the controller (:mod:`monarch_cy._hosts.proc_capture`).

:func:`set_level` is Monarch's ``logging_option(level=)``: the root logger's level
in every proc of a mesh (default ``logging.INFO``, set when the proc starts).
"""

from __future__ import annotations

import io
import os
import sys
import threading

from monarch_cy._actor.base import state as _state
from monarch_cy._actor.host import log_prefix
from monarch_cy._actor.model.actor import Actor
from monarch_cy._actor.model.endpoint import endpoint

__all__ = ["install_forwarding", "TAG", "SEP", "LevelActor", "LEVEL_NAME"]

TAG, SEP = "\x1e", "\x1f"          # marks an actor's line: TAG name SEP rank SEP text
LEVEL_NAME = "monarch_cy_logging"


def _who(proc_rank: int):
    inst = getattr(_state.local, "instance", None)
    return (inst.name, inst.rank.rank) if inst is not None else ("proc", proc_rank)


class _Lines(io.TextIOBase):
    """Per-thread line buffering; ``_emit(text, whole)`` gets complete lines."""

    def __init__(self, stream: str, proc_rank: int) -> None:
        self._stream, self._proc_rank = stream, proc_rank
        self._bufs = {}

    def writable(self):
        return True

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "backslashreplace"

    def isatty(self):
        return False

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        tid = threading.get_ident()
        buf = self._bufs.get(tid, "") + s
        if "\n" in buf:
            done, _, rest = buf.rpartition("\n")
            self._bufs[tid] = rest
            self._emit(done, True)
        else:
            self._bufs[tid] = buf
        return len(s)

    def flush(self) -> None:
        tid = threading.get_ident()
        buf = self._bufs.get(tid)
        if buf:
            self._bufs[tid] = ""
            self._emit(buf, False)


class _FdLines(_Lines):
    """Writes straight to fd 1 or 2 (a FIFO the controller reads); see above."""

    def __init__(self, fd: int, stream: str, proc_rank: int) -> None:
        super().__init__(stream, proc_rank)
        self._fd = fd
        self._midline = set()          # threads whose last write ended mid-line

    def fileno(self):
        return self._fd

    def _emit(self, text: str, whole: bool) -> None:
        tid = threading.get_ident()
        who, rank = _who(self._proc_rank)
        lines = text.split("\n")
        if tid in self._midline:        # continues a line already begun: no tag
            first, lines = lines[0], lines[1:]
            self._midline.discard(tid)
        else:
            first = None
        tagged = [f"{TAG}{who}{SEP}{rank}{SEP}{ln}" if who != "proc" else ln
                  for ln in lines]
        if first is not None:
            tagged.insert(0, first)
        data = "\n".join(tagged)
        if whole:
            data += "\n"
        else:
            self._midline.add(tid)
        _write_all(self._fd, data.encode("utf-8", "backslashreplace"))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:
            return                      # the controller is gone: nobody reads
        view = view[n:]


def install_forwarding(node, cfg: dict) -> None:
    """This worker's ``sys.stdout``/``sys.stderr`` (see the module docstring), and
    the root logger's level (Monarch's default, ``INFO``)."""
    rank = cfg["proc_rank"]
    if cfg.get("stdio"):          # (always, for procs monarch_cy starts)
        sys.stdout = _FdLines(1, "stdout", rank)
        sys.stderr = _FdLines(2, "stderr", rank)
    import logging  # deferred: import time (the controller loads this module too)
    logging.getLogger().setLevel(logging.INFO)
    log_prefix.install()        # records made in actors name the actor (Monarch's)


class LevelActor(Actor):
    """Spawned once per proc mesh by ``logging_option(level=)``: sets the level of
    the root logger of its proc (Monarch's ``LoggerRuntimeActor``)."""

    @endpoint
    def set_level(self, level: int) -> None:
        import logging  # deferred: import time (see install_forwarding)
        logging.getLogger().setLevel(level)
