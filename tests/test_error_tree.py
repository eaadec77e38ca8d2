"""monarch_cy.errors and monarch_cy._errors: the whole exception tree, one home, all exported."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

from monarch_cy import errors

# Every module that defines errors of the tree.
HOMES = ["monarch_cy._errors", "monarch_cy._actor.errors", "monarch_cy._hosts.errors",
         "monarch_cy._collectives._errors", "monarch_cy._rdma_buffer._errors",
         "monarch_cy._verbs._errors"]
# A subclass that shares a public name with its base (rdma's handle check raises it;
# ``except errors.ForeignJobError`` catches it).
SAME_NAME = {("monarch_cy._rdma_buffer._errors", "ForeignJobError")}


def _defined():
    for home in HOMES:
        mod = importlib.import_module(home)
        for name, obj in vars(mod).items():
            if (isinstance(obj, type) and issubclass(obj, errors.MonarchCyError)
                    and obj.__module__ in (home, "monarch_cy._collectives._errors")
                    and (home, name) not in SAME_NAME):
                yield name, obj


def test_every_error_of_the_tree_is_exported():
    missing = {n for n, cls in _defined() if getattr(errors, n, None) is not cls}
    assert missing == set()
    assert set(errors.__all__) == {n for n, _ in _defined()}
    assert issubclass(importlib.import_module("monarch_cy._rdma_buffer._errors")
                      .ForeignJobError, errors.ForeignJobError)


def test_all_derive_from_the_root_and_the_docstring_names_them():
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.MonarchCyError), name
        assert name in errors.__doc__, name


def test_exported_errors_survive_pickle_with_their_text():
    samples = [errors.SupervisionError("a", 0, "boom"), errors.HostLostError("h gone"),
               errors.MeshStoppedError("m", 1, "stopped")]
    for e in samples:
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e)


def test_import_is_light():
    code = ("import sys, monarch_cy.errors\n"
            "print(sorted(m for m in ('zmq', 'torch', 'cloudpickle', 'asyncio') "
            "if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_error_classes_are_defined_in_one_module():
    """The exception tree has one home: no other module of the package defines an
    error class (the transport's two control-flow signals, ``Again`` and ``Closed``,
    are not errors users see)."""
    import ast
    import pathlib
    pkg = pathlib.Path(errors.__file__).parent
    found = []
    for path in pkg.rglob("*.py"):
        if path.name == "_errors.py" and path.parent == pkg:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and (
                    node.name.endswith(("Error", "Warning", "Timeout", "Unavailable"))):
                found.append(f"{path.relative_to(pkg)}:{node.name}")
    assert found == []
