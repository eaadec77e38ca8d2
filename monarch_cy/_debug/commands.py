"""The ``monarch_dbg>`` command language, as Monarch's debugger reads it.

========================================  ==============================================
``help``, ``h``                           the commands
``list``, ``l``                           the paused sessions, by actor name and rank
``attach NAME RANK``, ``a NAME RANK``     talk to that session's pdb (``detach`` returns)
``attach RANK``                           the same, when one actor name has sessions
``cast NAME ranks(SEL) CMD``              send the pdb command ``CMD`` to several ranks
``cast ranks(SEL) CMD``                   the same, when one actor name has sessions
``continue``, ``c``                       clear breakpoints, continue every session
``quit``, ``q``                           leave this prompt
========================================  ==============================================

``SEL`` is Monarch's: ``3``; ``1,4,6``; ``start:stop:step`` (each part optional, as a
Python slice); or dimensions ``host=0:2, gpu=(1,3), x=2``.  ``CMD`` starts with a
letter, digit or ``_``.  :func:`parse` returns one of the dataclasses below or raises
``ValueError`` saying what was expected (Monarch's parser is lark; this one is plain
Python, so workers never need lark).

The forms without an actor name (and ``exit`` for ``quit``) are monarch_cy's; with
``monarch=True`` (and :meth:`DebugCommand.parse`, Monarch's entry point: it prints
the error on the debugger's io and returns None) only Monarch's language is
accepted.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Union

__all__ = ["DebugCommand", "Help", "ListCommand", "Attach", "Cast", "Continue", "Quit",
           "parse", "RanksType", "HELP"]

RanksType = Union[int, list, range, dict]


class DebugCommand:
    """A ``monarch_dbg>`` command (the base of the dataclasses below, as Monarch's)."""

    @staticmethod
    async def parse(debug_io, line: str) -> "DebugCommand | None":
        """Monarch's entry point: the command ``line`` names in Monarch's language,
        or None after writing ``Error parsing input: ...`` on ``debug_io`` (a
        :class:`~monarch_cy._debug.debug_io.DebugIO`)."""
        try:
            return parse(line, monarch=True)
        except ValueError as e:
            await debug_io.output(f"Error parsing input: {e}\n")
            return None


@dataclass
class Help(DebugCommand):
    pass


@dataclass
class ListCommand(DebugCommand):
    pass


@dataclass
class Attach(DebugCommand):
    actor_name: str | None      # None: the only actor name with sessions
    rank: int


@dataclass
class Cast(DebugCommand):
    actor_name: str | None
    ranks: RanksType
    command: str


@dataclass
class Continue(DebugCommand):
    pass


@dataclass
class Quit(DebugCommand):
    pass


HELP = """monarch_dbg commands:
\tattach <actor_name> <rank> - attach to a debug session ('attach <rank>' when one actor has sessions)
\tlist - list all debug sessions
\tquit - leave this prompt (when no other debugger is attached, the paused ranks continue)
\tcast <actor_name> ranks(...) <command> - send a command to a set of ranks on the specified actor mesh.
\t\tThe value inside ranks(...) can be a single rank (ranks(1)),
\t\ta list of ranks (ranks(1,4,6)), a range of ranks (ranks(start?:stop?:step?)),
\t\tor a dict of dimensions (ranks(dim1=1:5:2,dim2=3, dim4=(3,6))).
\tcontinue - clear all breakpoints and tell all ranks to continue
\thelp - print this help message
inside a session: any pdb command; 'detach' returns here and leaves the rank paused
"""

_NAME = r"[-_a-zA-Z0-9]+"
_INT = re.compile(r"^\s*-?\d+\s*$")


def _int(text: str, what: str) -> int:
    if not _INT.match(text):
        raise ValueError(f"{what} must be an integer, not {text.strip()!r}")
    return int(text)


def _range(text: str) -> range:
    parts = text.split(":")
    if len(parts) > 3:
        raise ValueError(f"a rank range is start:stop:step, not {text!r}")
    start = _int(parts[0], "a range's start") if parts[0].strip() else 0
    stop = _int(parts[1], "a range's stop") if parts[1].strip() else sys.maxsize
    step = _int(parts[2], "a range's step") if len(parts) == 3 and parts[2].strip() else 1
    if step == 0:
        raise ValueError(f"a rank range's step must not be 0 (in {text!r})")
    return range(start, stop, step)


def _one(text: str):
    """A single selector: an int, a range, or a parenthesised list."""
    t = text.strip()
    if t.startswith("(") and t.endswith(")"):
        return [_int(x, "a listed rank") for x in t[1:-1].split(",")]
    if ":" in t:
        return _range(t)
    return _int(t, "a rank")


def _split_top(text: str) -> list:
    """Split on commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def parse_ranks(inner: str) -> RanksType:
    """The value of ``ranks(inner)``."""
    inner = inner.strip()
    if not inner:
        raise ValueError("ranks() needs a rank, a list, a range or dimensions")
    if "=" in inner:
        dims = {}
        for part in _split_top(inner):
            if "=" not in part:
                raise ValueError(f"every part of ranks({inner}) must be dim=value, "
                                 f"not {part.strip()!r}")
            dim, value = part.split("=", 1)
            if not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", dim.strip()):
                raise ValueError(f"{dim.strip()!r} is not a dimension name")
            dims[dim.strip()] = _one(value)
        return dims
    if ":" in inner:
        return _range(inner)
    if "," in inner:
        return [_int(x, "a listed rank") for x in inner.split(",")]
    return _int(inner, "a rank")


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis closing the one opened just before ``start``."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def parse(line: str, monarch: bool = False):
    """The command ``line`` names; ``ValueError`` saying what is wrong.
    ``monarch``: Monarch's language only (an actor name is required)."""
    text = line.strip()
    word, _, rest = text.partition(" ")
    rest = rest.strip()
    if word in ("h", "help") and not rest:
        return Help()
    if word in ("l", "list") and not rest:
        return ListCommand()
    if word in ("c", "continue") and not rest:
        return Continue()
    if word in (("q", "quit") if monarch else ("q", "quit", "exit")) and not rest:
        return Quit()
    if word in ("a", "attach"):
        parts = rest.split()
        if len(parts) == 1 and not monarch:
            return Attach(None, _int(parts[0], "attach's rank"))
        if len(parts) == 2 and re.fullmatch(_NAME, parts[0]):
            return Attach(parts[0], _int(parts[1], "attach's rank"))
        raise ValueError(f"usage: attach <actor_name> <rank> (got {text!r})")
    if word == "cast":
        m = re.match(rf"({_NAME})\s+ranks\(" if monarch else rf"(?:({_NAME})\s+)?ranks\(",
                     rest)
        end = _closing(rest, m.end()) if m else -1
        if end < 0:
            raise ValueError(f"usage: cast <actor_name> ranks(...) <command> (got {text!r})")
        command = rest[end + 1:].strip()
        if not re.match(r"\w", command):
            raise ValueError(f"cast needs a pdb command after ranks(...) (got {text!r})")
        return Cast(m.group(1), parse_ranks(rest[m.end():end]), command)
    raise ValueError(f"unknown command {text!r}; enter 'help' for the commands")
