"""The floors of the house, read from the source with ``ast`` (nothing is imported but
the error tree): the actor model's floors import only downward, no import loop spans
two of them, no module outside the transport touches a private attribute of its
node, a deferred import says why, and every error names a public home.

Run with ``-s`` to see the layer map that was checked.
"""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict

import pytest

PKG = pathlib.Path(__file__).resolve().parent.parent / "monarch_cy"
ACTOR = "monarch_cy._actor"
# Bottom up.  The package face (``_actor/__init__``) and the top modules (the wiring,
# the worker bootstrap) sit above every floor.
FLOORS = ("base", "cast", "model", "host", "launch", "meshes")
TOP = "top"


def _modules() -> dict:
    out = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG.parent).with_suffix("")
        name = ".".join(rel.parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        out[name] = path
    return out


MODULES = _modules()


def _resolve(mod: str, node) -> list:
    """The monarch_cy modules an import statement of ``mod`` names."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        if node.level:
            base = mod.split(".")
            if not MODULES[mod].name == "__init__.py":
                base = base[:-1]
            base = base[: len(base) - node.level + 1]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in MODULES else prefix
                   for a in node.names]
    out = []
    for t in targets:
        while t not in MODULES and "." in t:
            t = t.rsplit(".", 1)[0]
        if t in MODULES:
            out.append(t)
    return out


def _imports(mod: str):
    """``(target, lineno, deferred)`` for every monarch_cy import of ``mod``."""
    tree = ast.parse(MODULES[mod].read_text())

    def walk(n, deferred):
        for c in ast.iter_child_nodes(n):
            if isinstance(c, (ast.Import, ast.ImportFrom)):
                for t in _resolve(mod, c):
                    if t != mod:
                        yield t, c.lineno, deferred
            yield from walk(c, deferred or isinstance(
                c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    yield from walk(tree, False)


def floor_of(mod: str):
    """The floor of an actor-model module (None outside the actor model)."""
    if mod == ACTOR or not mod.startswith(ACTOR + "."):
        return TOP if mod == ACTOR else None
    part = mod.split(".")[2]
    return part if part in FLOORS else TOP


def _rank(floor: str) -> int:
    return len(FLOORS) if floor == TOP else FLOORS.index(floor)


def _actor_graph() -> dict:
    graph = defaultdict(set)
    for mod in MODULES:
        if floor_of(mod) is None:
            continue
        for t, _, _ in _imports(mod):
            if floor_of(t) is not None:
                graph[mod].add(t)
    return graph


def _cycles(graph: dict) -> list:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_print_the_layer_map():
    """The map this file checks: each floor, its modules and lines, bottom up."""
    floors = defaultdict(list)
    for mod in sorted(MODULES):
        f = floor_of(mod)
        if f is not None:
            floors[f].append(mod)
    print()
    for f in (*FLOORS, TOP):
        mods = floors[f]
        lines = sum(len(MODULES[m].read_text().splitlines()) for m in mods)
        print(f"  {f:7} {len(mods):2} modules {lines:5} lines: "
              + ", ".join(m.rsplit(".", 1)[-1] for m in mods))
    assert all(floors[f] for f in FLOORS), "a floor has no module"


def test_no_arrow_points_up():
    up = []
    for mod in MODULES:
        f = floor_of(mod)
        if f is None:
            continue
        for t, line, _ in _imports(mod):
            g = floor_of(t)
            if g is not None and _rank(g) > _rank(f):
                up.append(f"{mod}:{line} ({f}) imports {t} ({g})")
    assert up == []


def test_no_import_loop_spans_two_floors():
    spanning = [c for c in _cycles(_actor_graph()) if len({floor_of(m) for m in c}) > 1]
    assert spanning == []


def test_no_import_loop_in_the_actor_model_or_the_transport():
    """Within a floor a loop would be allowed; today there is none, and none in the
    transport either."""
    graph = _actor_graph()
    for mod in MODULES:
        if mod.startswith("monarch_cy._transport"):
            graph[mod] = {t for t, _, _ in _imports(mod) if t.startswith("monarch_cy._transport")}
    assert _cycles(graph) == []


def test_the_transport_imports_nothing_of_the_actor_model():
    bad = [f"{m}:{line} imports {t}" for m in MODULES if m.startswith("monarch_cy._transport")
           for t, line, _ in _imports(m) if t.startswith(ACTOR)]
    assert bad == []


def test_deferred_imports_say_why():
    """An import inside a function of the actor model names its reason on the line
    (or in a comment heading its block of imports): import time, or a real cycle."""
    silent = []
    for mod in MODULES:
        if floor_of(mod) is None:
            continue
        lines = MODULES[mod].read_text().splitlines()
        for _, line, deferred in _imports(mod):
            if not deferred:
                continue
            here, k = lines[line - 1], line - 2
            while k >= 0 and lines[k].strip().startswith(("from ", "import ")) \
                    and "#" not in lines[k]:
                k -= 1                       # one comment may head a block of imports
            if "#" not in here and not (k >= 0 and lines[k].strip().startswith("#")):
                silent.append(f"{mod}:{line}: {here.strip()}")
    assert sorted(set(silent)) == []


def _node_privates() -> set:
    """Private attributes and methods of the transport's node (and its mixins)."""
    names = set()
    for f in ("node.py", "pump.py", "senders.py", "ports.py"):
        tree = ast.parse((PKG / "_transport" / f).read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                    and n.value.id == "self" and n.attr.startswith("_") \
                    and not n.attr.startswith("__"):
                names.add(n.attr)
            elif isinstance(n, (ast.FunctionDef,)) and n.name.startswith("_") \
                    and not n.name.startswith("__"):
                names.add(n.name)
    return names


def test_nothing_outside_the_transport_touches_the_node_privately():
    privates = _node_privates() | {"_node", "_node_lock"}
    found = []
    for mod, path in MODULES.items():
        if mod.startswith("monarch_cy._transport"):
            continue
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Attribute) and n.attr in privates:
                receiver = ast.unparse(n.value)
                if "node" in receiver.lower() or receiver in ("N", "n"):
                    found.append(f"{mod}:{n.lineno}: {ast.unparse(n)}")
            elif isinstance(n, ast.ImportFrom) and (n.module or "").startswith(
                    "monarch_cy._transport"):
                found += [f"{mod}:{n.lineno}: imports {n.module}.{a.name}"
                          for a in n.names if a.name in ("_node", "_node_lock")]
    assert found == []


def test_every_error_class_names_a_public_module():
    from monarch_cy import _errors
    private = {name: obj.__module__ for name in _errors.__all__
               if isinstance(obj := getattr(_errors, name), type)
               and any(p.startswith("_") for p in obj.__module__.split("."))}
    assert private == {}


@pytest.mark.parametrize("floor", FLOORS)
def test_each_floor_lists_its_modules(floor):
    """A floor's ``__init__`` names every module of it (the map a newcomer reads)."""
    doc = ast.get_docstring(ast.parse((PKG / "_actor" / floor / "__init__.py").read_text()))
    mods = sorted(p.stem for p in (PKG / "_actor" / floor).glob("*.py") if p.stem != "__init__")
    missing = [m for m in mods if f":mod:`.{m}`" not in (doc or "")]
    assert missing == []
