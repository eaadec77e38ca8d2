"""The debugger's pieces at Monarch's private paths, without a job: the command
language (``DebugCommand.parse``), the session table (``DebugSessions``), and the
bridge from a Monarch ``DebugIO`` to a console (``LoopIO``)."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from monarch_cy._debug import commands as C
from monarch_cy._debug.debug_io import DebugIO, LoopIO
from monarch_cy._debug.sessions import DebugSession, DebugSessionInfo, DebugSessions


class _RecordingIO(DebugIO):
    def __init__(self, lines=()):
        self.lines = list(lines)
        self.out = []
        self.quits = 0

    async def input(self, prompt=""):
        self.out.append(prompt)
        if not self.lines:
            raise EOFError("no more input")
        return self.lines.pop(0)

    async def output(self, msg):
        self.out.append(msg)

    async def quit(self):
        self.quits += 1


def _parse(line):
    io = _RecordingIO()
    return asyncio.run(C.DebugCommand.parse(io, line)), io.out


# -- the command language -------------------------------------------------------------

@pytest.mark.parametrize("line,want", [
    ("attach trainer 3", C.Attach("trainer", 3)),
    ("a my-actor_2 10", C.Attach("my-actor_2", 10)),
    ("l", C.ListCommand()), ("help", C.Help()), ("q", C.Quit()), ("continue", C.Continue()),
    ("cast t ranks(4) p x", C.Cast("t", 4, "p x")),
    ("cast t ranks(1,5) n", C.Cast("t", [1, 5], "n")),
    ("cast t ranks(2::3) n", C.Cast("t", range(2, sys.maxsize, 3), "n")),
    ("cast t ranks(:7) up 2", C.Cast("t", range(0, 7), "up 2")),
    ("cast t ranks(host=1, gpu=(0,2), x=1:3) bt",
     C.Cast("t", {"host": 1, "gpu": [0, 2], "x": range(1, 3)}, "bt")),
])
def test_monarch_language_parses_to_the_command_dataclasses(line, want):
    got, out = _parse(line)
    assert got == want and isinstance(got, C.DebugCommand)
    assert out == []


@pytest.mark.parametrize("line", [
    "", "attach", "attach t", "attach t 1 2", "attach t x", "attach 3",
    "cast ranks(1) n", "cast t ranks() n", "cast t ranks(1,) n", "cast t ranks(1,,2) n",
    "cast t ranks(::::) n", "cast t ranks(1:2:3,4) n", "cast t ranks(1,2)) n",
    "cast t ranks(1,2", "cast t ranks(d=) n", "cast t ranks(d=1,) n", "exit", "bogus",
])
def test_what_monarch_refuses_is_none_and_an_error_line(line):
    got, out = _parse(line)
    assert got is None
    assert len(out) == 1 and out[0].startswith("Error parsing input: ")


def test_our_console_also_takes_the_forms_without_an_actor_name():
    assert C.parse("attach 3") == C.Attach(None, 3)
    assert C.parse("cast ranks(1,2) p x") == C.Cast(None, [1, 2], "p x")
    assert C.parse("exit") == C.Quit()
    with pytest.raises(ValueError):
        C.parse("attach 3", monarch=True)


# -- the session table ------------------------------------------------------------------

def test_sessions_table_insert_get_remove_with_monarchs_errors():
    t = DebugSessions()
    a0, a1 = DebugSession(0, {}, "h", "a"), DebugSession(1, {}, "h", "a")
    with pytest.raises(ValueError, match="No debug sessions for actor a"):
        t.get("a", 0)
    t.insert(a0)
    with pytest.raises(ValueError, match="Debug session for rank 0 already exists for actor a"):
        t.insert(DebugSession(0, {}, "h", "a"))
    with pytest.raises(ValueError, match="No debug session for rank 1 for actor a"):
        t.remove("a", 1)
    t.insert(a1)
    assert t.get("a", 1) is a1 and ("a", 1) in t and len(t) == 2
    assert t.remove("a", 0) is a0 and ("a", 0) not in t and len(t) == 1
    assert t.remove("a", 1) is a1
    with pytest.raises(ValueError, match="No debug sessions for actor a"):
        t.remove("a", 1)


def test_sessions_iter_selects_by_rank_list_range_and_dimensions():
    t = DebugSessions()
    for name in ("x", "y"):
        for host in range(2):
            for gpu in range(4):
                t.insert(DebugSession(host * 4 + gpu, {"host": host, "gpu": gpu}, "", name))

    def ranks(sel):
        return [(s.actor_name, s.rank) for s in t.iter(sel)]

    assert ranks(("x", 5)) == [("x", 5)]
    assert ranks(("y", [7, 1])) == [("y", 1), ("y", 7)]
    assert ranks(("x", range(1, 8, 3))) == [("x", 1), ("x", 4), ("x", 7)]
    assert ranks(("x", {"host": 1, "gpu": range(2, 9)})) == [("x", 6), ("x", 7)]
    assert ranks(("x", {"gpu": [0, 3]})) == [("x", 0), ("x", 3), ("x", 4), ("x", 7)]
    assert ranks(("x", {"host": 0, "missing": 0})) == []
    assert ranks(("nobody", None)) == []
    assert len(ranks(None)) == 16 and len(ranks(("y", None))) == 8


def test_session_info_orders_by_actor_then_rank():
    infos = [DebugSessionInfo("b", 0, {}, "", None, None),
             DebugSessionInfo("a", 2, {"k": 1}, "", "m.f", 3),
             DebugSessionInfo("a", 1, {"k": 0}, "", None, None)]
    assert [(i.actor_name, i.rank) for i in sorted(infos)] == [("a", 1), ("a", 2), ("b", 0)]


def test_a_session_runs_after_continue_and_is_listed_until_its_end():
    t = DebugSessions()

    class Port:
        def __init__(self):
            self.sent = []

        def send(self, v):
            self.sent.append(v)

    p = Port()
    assert t.read(p, "a", 0, {}, "h", "m.f", 4, ["> here\n", "(Pdb) "]) is True
    s = t.find("a", 0)
    assert s.paused and s.since_input == ["> here\n", "(Pdb) "]
    t.send(s, "c")
    assert p.sent == ["c"] and not s.paused and s.since_input == []
    t.running("a", 0, ["ran\n"])
    assert s.running and t.all_running() and len(t) == 1
    t.read(Port(), "a", 0, {}, "h", "m.g", 9, [])       # post-mortem: the same session
    assert t.find("a", 0) is s and not s.running and s.lineno == 9
    t.end("a", 0, ["bye\n"])
    assert s.ended and len(t) == 0 and s.unseen[-1] == "bye\n"


# -- a Monarch DebugIO under a console --------------------------------------------------

def test_loop_io_runs_the_ios_coroutines_on_its_loop_and_closes_at_its_end():
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        dio = _RecordingIO(["list\n"])
        io = LoopIO(dio, loop)
        io.output("hello")
        assert io.input("monarch_dbg> ") == "list"
        assert io.input("monarch_dbg> ") is None and io.closed   # EOFError: input over
        io.output("dropped")
        io.quit()
        assert dio.out == ["hello", "monarch_dbg> ", "monarch_dbg> "] and dio.quits == 0
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)
        loop.close()


def test_awaiting_monarchs_plain_tcp_server_says_why_there_is_none():
    from monarch_cy._debug.controller import _NoTcpServer

    async def main():
        await _NoTcpServer()

    with pytest.raises(NotImplementedError, match="no plain TCP server.*job secret"):
        asyncio.run(main())
