"""monarch_cy.errors and monarch_cy._errors: the whole exception tree, one home, all exported."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

from monarch_cy import errors

from monarch_cy import _errors


def _defined():
    """Every class of the tree: errors and warnings, all defined in ``_errors``."""
    for name in _errors.__all__:
        obj = getattr(_errors, name)
        if isinstance(obj, type):
            yield name, obj


def test_every_class_of_the_tree_is_exported_under_its_public_name():
    missing = {n for n, cls in _defined() if getattr(errors, n, None) is not cls}
    assert missing == set()
    assert set(errors.__all__) == {n for n, _ in _defined()}


def test_every_class_names_its_public_home():
    """Tracebacks and pickles name the module users import from, never a private one."""
    private = {n: cls.__module__ for n, cls in _defined() if cls.__module__ != "monarch_cy.errors"}
    assert private == {}
    data = pickle.dumps(errors.ActorError(None, "tb", "m", 0, "ep"))
    assert b"monarch_cy.errors" in data and b"_errors" not in data.replace(b"monarch_cy.errors", b"")


def test_one_class_per_name():
    """One ForeignJobError: a subsystem does not define its own class of a shared name."""
    import monarch_cy.rdma
    import monarch_cy.actor
    assert monarch_cy.rdma.ForeignJobError is errors.ForeignJobError
    names = [cls.__name__ for _, cls in _defined()]
    assert len(names) == len(set(names))


def test_all_derive_from_the_root_and_the_docstring_names_them():
    for name in errors.__all__:
        cls = getattr(errors, name)
        if issubclass(cls, Warning):
            assert name in errors.__doc__, name
            continue
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
