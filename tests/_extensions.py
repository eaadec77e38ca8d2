"""The compiled extensions the build makes, read from ``setup.py`` (their one home).

``setup.py`` runs setuptools when imported, so its ``CYTHON_MODULES`` list is read
with :mod:`ast` instead.  Each entry is given as the path of its ``.so`` inside a
wheel without the ABI suffix (``monarch_cy/_transport/_unixio``), which is what the
wheel and source-build tests look for.
"""

from __future__ import annotations

import ast
from pathlib import Path

SETUP = Path(__file__).resolve().parents[1] / "setup.py"


def _cython_modules() -> tuple[str, ...]:
    for node in ast.parse(SETUP.read_text()).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "CYTHON_MODULES" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"{SETUP} has no CYTHON_MODULES list")


MODULES = _cython_modules()
SO_STEMS = tuple(m.replace(".", "/") for m in MODULES)


def so_in(names, stem: str) -> list[str]:
    """The names in ``names`` (wheel members) that are the ``.so`` of ``stem``."""
    return [n for n in names if n.startswith(f"{stem}.") and n.endswith(".so")]
