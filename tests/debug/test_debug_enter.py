"""The debugger driven from a program through Monarch's controller API, on monarch_cy
alone: the differential scenario ``debugger_enter.py`` (a ``DebugController``
subclass whose ``_debug_io`` is scripted, ``await self._enter()`` until ``quit``),
its observations checked here.  A session lasts as long as its endpoint call:
after ``c`` into an exception it is still listed, paused post-mortem at the raising
function; ``quit`` leaves sessions paused; the output replayed on a second attach is
pdb's own pieces since the last command."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "compat", "differential"))

import harness  # noqa: E402


def test_a_program_drives_the_debugger_through_enter():
    code, out, err = harness.run_one("monarch_cy", "debugger_enter.py", [], 180)
    rec = harness.record_of(code, out, err)
    assert rec["exit_code"] == 0, err[-3000:]
    paused = rec["paused"]
    assert [(p[0], p[1], p[2]) for p in paused] == [
        (0, {"hosts": 0, "gpus": 0}, "_debugee_actors.work"),
        (1, {"hosts": 0, "gpus": 1}, "_debugee_actors.work")]
    line0 = paused[0][3]
    assert rec["replayed_after_reattach"] == [
        f"> {os.path.join(harness.SCENARIOS, '_debugee_actors.py')}({line0 + 1})work()\n"
        "-> rank += 10", "\n", "(Pdb) "]
    assert [p[3] for p in rec["stepped"]] == [line0 + 1, paused[1][3]]
    after = rec["after_continue_into_raise"]
    assert [(a[0], a[2]) for a in after] == [(0, "_debugee_actors.work"),
                                             (1, "_debugee_actors._fail")]
    assert rec["post_mortem_prompt_seen"] is True
    assert rec["left"] == [] and rec["sessions_at_end"] == []
    assert rec["call"] == {"type": "ActorError", "bad_rank": True}
