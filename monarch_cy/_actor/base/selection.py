"""``Selection``: Monarch's selection expressions over the points of a mesh.

Monarch's object is opaque: ``Selection.from_string(text)`` parses one (a bad one is a
``ValueError``), ``Selection.all()`` is ``*`` (every point), ``Selection.any()`` is
``?`` (one point, chosen at random).  The compact syntax, one term per dimension
from the first, separated by commas::

    *        every coordinate of the dimension
    ?        one coordinate, at random
    3        that coordinate
    1:4      coordinates 1, 2, 3 (``a:b:step``; ``:``, ``a:``, ``:b`` as in Python)
    (e)      a parenthesized expression: dimensions from here on
    e | e    union;   e & e   intersection (binds tighter than ``|``)

Dimensions not named are ``*``; a lone ``*`` or ``?`` stands for every dimension
(``?`` alone picks one point).  ``(*, 0:4)`` is the first four coordinates of the
second dimension; ``0 & (1 | 2)`` is empty.

Ours: ``sel.eval(shape)`` gives the global ranks a selection picks in a
:class:`~monarch_cy._actor.base.shape.Shape` or ``NDSlice``, in row-major order.
"""

from __future__ import annotations

import random
import re

from monarch_cy._actor.base.shape import NDSlice, Shape

__all__ = ["Selection"]

_TOKEN = re.compile(r"\s*(?:(\d+)|(.))")


def _tokens(text: str) -> list:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        num, ch = m.group(1), m.group(2)
        if ch is not None and ch not in "*?:,()|&":
            raise ValueError(f"invalid selection {text!r}: unexpected {ch!r} at {m.start(2)}")
        out.append(int(num) if num is not None else ch)
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.toks, self.i = text, _tokens(text), 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want=None):
        t = self.peek()
        if t is None or (want is not None and t != want):
            raise self.error(f"expected {want!r}" if want else "unexpected end")
        self.i += 1
        return t

    def error(self, what: str) -> ValueError:
        return ValueError(f"invalid selection {self.text!r}: {what} (token {self.i})")

    def parse(self):
        if not self.toks:
            raise self.error("empty")
        node = self.union()
        if self.peek() is not None:
            raise self.error(f"unexpected {self.peek()!r}")
        return node

    def union(self):
        parts = [self.inter()]
        while self.peek() == "|":
            self.take()
            parts.append(self.inter())
        return parts[0] if len(parts) == 1 else ("|", tuple(parts))

    def inter(self):
        parts = [self.seq()]
        while self.peek() == "&":
            self.take()
            parts.append(self.seq())
        return parts[0] if len(parts) == 1 else ("&", tuple(parts))

    def seq(self):
        atoms = [self.atom()]
        while self.peek() == ",":
            if atoms[-1][0] == "()":
                raise self.error("a parenthesized expression must be the last term")
            self.take()
            atoms.append(self.atom())
        return ("seq", tuple(atoms))

    def atom(self):
        t = self.peek()
        if t == "(":
            self.take()
            inner = self.union()
            self.take(")")
            return ("()", inner)
        if t in ("*", "?"):
            self.take()
            return (t,)
        if t == ":" or isinstance(t, int):
            return self.range()
        raise self.error(f"unexpected {t!r}" if t is not None else "unexpected end")

    def range(self):
        nums, colons = [None], 0
        while True:
            t = self.peek()
            if isinstance(t, int):
                if nums[-1] is not None:
                    raise self.error("two numbers in a row")
                nums[-1] = self.take()
            elif t == ":" and colons < 2:
                self.take()
                colons += 1
                nums.append(None)
            else:
                break
        if colons == 0:
            return ("i", nums[0])
        start, stop = nums[0], nums[1]
        step = nums[2] if colons == 2 else None
        if step == 0:
            raise self.error("a step of 0")
        return ("r", start, stop, step)


def _values(atom, size: int):
    kind = atom[0]
    if kind == "*":
        return range(size)
    if kind == "?":
        return [random.randrange(size)] if size else []
    if kind == "i":
        return [atom[1]] if atom[1] < size else []
    return range(size)[slice(atom[1], atom[2], atom[3])]


def _eval(node, d: int, sizes) -> set:
    """The coordinate tuples for dimensions ``d..`` that ``node`` selects."""
    kind = node[0]
    if kind == "|":
        out = set()
        for p in node[1]:
            out |= _eval(p, d, sizes)
        return out
    if kind == "&":
        out = _eval(node[1][0], d, sizes)
        for p in node[1][1:]:
            out &= _eval(p, d, sizes)
        return out
    atoms = node[1]
    if len(atoms) == 1 and atoms[0][0] in ("*", "?"):     # stands for every dimension
        atoms = atoms * (len(sizes) - d) if len(sizes) > d else ()
    return _seq(atoms, d, sizes)


def _seq(atoms, d: int, sizes) -> set:
    if not atoms:
        out = {()}
        for n in sizes[d:]:
            out = {t + (c,) for t in out for c in range(n)}
        return out
    first = atoms[0]
    if first[0] == "()":
        return _eval(first[1], d, sizes)
    if d >= len(sizes):
        raise ValueError(f"the selection names more dimensions than the {len(sizes)} "
                         "of the mesh")
    rest = _seq(atoms[1:], d + 1, sizes)
    return {(c,) + t for c in _values(first, sizes[d]) for t in rest}


def _text(node) -> str:
    kind = node[0]
    if kind in ("|", "&"):
        return f" {kind} ".join(_text(p) for p in node[1])
    if kind == "seq":
        return ", ".join(_text(a) for a in node[1])
    if kind == "()":
        return f"({_text(node[1])})"
    if kind in ("*", "?"):
        return kind
    if kind == "i":
        return str(node[1])
    start, stop, step = node[1:]
    s = f"{'' if start is None else start}:{'' if stop is None else stop}"
    return s if step is None else f"{s}:{step}"


class Selection:
    """A selection expression (see the module docstring).  Immutable, picklable."""

    __slots__ = ("_node",)

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("construct a Selection with Selection.from_string(), "
                        "Selection.all() or Selection.any()")

    @classmethod
    def _of(cls, node) -> "Selection":
        s = object.__new__(cls)
        s._node = node
        return s

    @classmethod
    def from_string(cls, s: str) -> "Selection":
        """Parse ``s``; ``ValueError`` if it is not a selection expression."""
        if not isinstance(s, str):
            raise TypeError(f"a selection expression is a str, not {s!r}")
        return cls._of(_Parser(s).parse())

    @classmethod
    def all(cls) -> "Selection":
        """``*``: every point."""
        return cls._of(("seq", (("*",),)))

    @classmethod
    def any(cls) -> "Selection":
        """``?``: one point, chosen at random on each evaluation."""
        return cls._of(("seq", (("?",),)))

    def eval(self, shape) -> list:
        """The global ranks this selection picks in ``shape`` (a ``Shape`` or an
        ``NDSlice``), in row-major order (ours; Monarch's is opaque)."""
        sl = shape.ndslice if isinstance(shape, Shape) else shape
        if not isinstance(sl, NDSlice):
            raise TypeError(f"eval needs a Shape or an NDSlice, not {shape!r}")
        return [sl.nditem(list(c)) for c in sorted(_eval(self._node, 0, sl.sizes))]

    def __eq__(self, other):
        return isinstance(other, Selection) and self._node == other._node

    def __hash__(self):
        return hash(self._node)

    def __reduce__(self):
        return (Selection.from_string, (_text(self._node),))

    def __repr__(self):
        return f"Selection({_text(self._node)!r})"
