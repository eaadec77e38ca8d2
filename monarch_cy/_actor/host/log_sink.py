"""The controller's log sink: where every line a proc wrote is printed.

Lines arrive here from the capture of each proc's fds 1 and 2, in the controller's
pump (:mod:`monarch_cy._actor.launch.proc_output`; a proc on another host's bytes
come through its agent, :mod:`monarch_cy._hosts.proc_capture`).  Each line is
``(mesh id, stream, who, rank, text)``: ``who`` is the actor that wrote it (its
mesh's name; ``rank`` its rank in that mesh) or ``"proc"`` for output outside any
actor, C code and child processes (``rank``: the proc's rank in its proc mesh).

Per proc mesh (``ProcMesh.logging_option``):

* ``stream_to_client=False``: lines are not printed (they still reach the proc's
  log file and its failure tail);
* ``aggregate_window_sec=None`` (default): each line is printed as it arrives,
  ``[who] [rank] text`` (Monarch's shape: the writer, then its rank), to the
  controller's ``sys.stdout`` or ``sys.stderr`` (the stream the proc wrote to);
* ``aggregate_window_sec=w``: lines are held for ``w`` seconds from the first one
  held; then each distinct ``(who, text)`` is printed once, in Monarch's block::

      >>> Aggregated Logs (2025-01-01 12:00:00) >>>
      [8 similar log lines] [trainer ranks 0-7] loss 0.25
      <<< Aggregated Logs (2025-01-01 12:00:03) <<<

  (Monarch's colours included: cyan header and footer, yellow count).  Monarch folds
  lines whose edit distance is small; we fold identical texts and name the ranks
  that wrote them instead of the first one's prefix.  Switching aggregation off
  prints what is held at once; shrinking the window brings the deadline forward
  (:meth:`LogSink.apply_window`).

Ordering: a proc's lines of one stream are printed in the order it wrote them;
lines of different procs, or of stdout against stderr, in the order they were read.
Everything here runs in the pump (one thread), so nothing here locks; only
:meth:`LogSink.set_option` is called from other threads (one dict store).
"""

from __future__ import annotations

import sys
import time

__all__ = ["LogSink", "rank_ranges"]

_HEAD = "\x1b[36m>>> Aggregated Logs ({}) >>>\x1b[0m\n"
_FOOT = "\x1b[36m<<< Aggregated Logs ({}) <<<\x1b[0m\n"
_COUNT = "\x1b[33m[{} similar log lines]\x1b[0m "


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


class LogSink:
    """Controller side: prints forwarded lines, optionally aggregated per mesh."""

    def __init__(self, node) -> None:
        self.node = node
        self.options = {}      # mesh id -> (stream_to_client, window or None)
        self._pending = {}     # stream -> {(mesh, who, text): [ranks]}, insertion order
        self._started = None   # wall time the first held line arrived
        self._flush_at = None

    def line(self, mesh_id: int, stream: str, who: str, rank: int, text: str) -> None:
        """One line (without its newline) that a proc wrote; in the pump."""
        to_client, window = self.options.get(mesh_id, (True, None))
        if not to_client:
            return
        if window:
            held = self._pending.setdefault(stream, {})
            held.setdefault((mesh_id, who, text), []).append(rank)
            if self._flush_at is None:
                self._started = time.time()
                self._flush_at = time.monotonic() + window
                self.node.add_timer(window, self._timer)
            return
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.write(f"[{who}] [{rank}] {text}\n")
        out.flush()

    def set_option(self, mesh_id: int, to_client: bool, window) -> None:
        """``logging_option``'s streaming and window for one mesh, from any thread
        (one dict store: the next line read follows it).  Then
        :meth:`apply_window` in the pump."""
        self.options[mesh_id] = (to_client, window)

    def apply_window(self, mesh_id: int) -> None:
        """After :meth:`set_option`; in the pump.  Lines held for the mesh are printed
        now when it no longer aggregates (or streams); when its window shrank, the
        held lines are printed by the new deadline."""
        to_client, window = self.options.get(mesh_id, (True, None))
        if not window or not to_client:
            self.flush(mesh_id)
        elif self._flush_at is not None and time.monotonic() + window < self._flush_at:
            self._flush_at = time.monotonic() + window
            self.node.add_timer(window, self._timer)

    def _timer(self) -> None:
        if self._flush_at is not None and time.monotonic() >= self._flush_at - 1e-3:
            self.flush()

    def flush(self, mesh_id: int | None = None) -> None:
        """Print held lines now (all, or those of one mesh); in the pump."""
        pending, keep = self._pending, {}
        self._pending = {}
        for stream, held in pending.items():
            now = {k: v for k, v in held.items() if mesh_id is None or k[0] == mesh_id}
            rest = {k: v for k, v in held.items() if k not in now}
            if rest:
                keep[stream] = rest
            if not now:
                continue
            out = sys.stdout if stream == "stdout" else sys.stderr
            text = [_HEAD.format(_stamp(self._started or time.time()))]
            for (_, who, line), ranks in now.items():
                text.append(f"{_COUNT.format(len(ranks))}[{who} "
                            f"{_label(ranks)}] {line}\n")
            text.append(_FOOT.format(_stamp(time.time())))
            out.write("".join(text))
            out.flush()
        self._pending = keep
        if not keep:
            self._flush_at = self._started = None


def _label(ranks) -> str:
    distinct = sorted(set(ranks))
    if len(distinct) == 1:
        return str(distinct[0])
    return "ranks " + rank_ranges(distinct)


def rank_ranges(ranks) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"`` (``ranks`` sorted, distinct)."""
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
