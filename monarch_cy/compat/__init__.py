"""monarch_cy.compat: run unmodified Monarch programs (``from monarch.actor import ...``).

:func:`install` puts an import finder first on :data:`sys.meta_path` that makes
Monarch's public modules resolve to monarch_cy's own module objects::

    monarch               -> monarch_cy.compat._monarch   (a small package: lazy names)
    monarch.actor         -> monarch_cy.actor
    monarch.rdma          -> monarch_cy.rdma
    monarch.job           -> monarch_cy.job   (.kubernetes, .spmd: its names)
    monarch.spmd          -> monarch_cy.spmd
    monarch.config        -> monarch_cy.config
    monarch.tools.network -> monarch_cy.compat._network

so ``monarch.actor.Actor is monarch_cy.actor.Actor``, and makes the private paths
that Monarch's examples and libraries import (``monarch._src.actor.actor_mesh``...)
modules holding monarch_cy's equivalents (the table is :mod:`._paths`).  Every other
``monarch.*`` module raises ``ModuleNotFoundError`` naming it and pointing to
``docs/monarch-compat.md``.

It refuses (``RuntimeError``) when the real Monarch (the ``torchmonarch``
distribution, or some other importable ``monarch`` package) is installed, unless
``install(shadow=True)``, where ours wins over it.  Workers of a controller that
called :func:`install` call ``install(shadow=True)`` before any user code is
unpickled, so user modules that import ``monarch.actor`` import there too.

Command line: ``python -m monarch_cy.compat script.py [args]`` (or ``-m module``,
``-c code``, ``-``) runs a Monarch program as ``python script.py [args]`` would,
after :func:`install`.  In IPython/Jupyter: ``%load_ext monarch_cy.compat``.

Importing this module is cheap (~1 ms): it imports neither torch, zmq nor
monarch_cy's runtime (the targets are imported when ``monarch.*`` is), nor
``importlib.abc``/``importlib.metadata`` (the latter only when :func:`install` checks
for the real Monarch, never with ``shadow=True``).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import threading

__all__ = ["install", "installed", "uninstall", "real_monarch", "PUBLIC_MODULES",
           "CompatFinder"]

#: Monarch's public module name -> the monarch_cy module it resolves to.  Every
#: path resolved (private ones included) is in :mod:`._paths`.
PUBLIC_MODULES = {
    "monarch": "monarch_cy.compat._monarch",
    "monarch.actor": "monarch_cy.actor",
    "monarch.rdma": "monarch_cy.rdma",
    "monarch.job": "monarch_cy.job",
    "monarch.spmd": "monarch_cy.spmd",
    "monarch.config": "monarch_cy.config",
    "monarch.tools.network": "monarch_cy.compat._network",
}

#: Names of distributions of the real Monarch.
REAL_DISTRIBUTIONS = ("torchmonarch", "torchmonarch-nightly")

_lock = threading.RLock()
_finder = None          # the installed CompatFinder, or None


class _AliasLoader:
    """Loads ``monarch.X`` as the already existing module ``target``.

    ``exec_module`` imports the target and puts *it* in ``sys.modules`` under the
    Monarch name: the import system returns what ``sys.modules`` holds after
    ``exec_module``, so the target itself (its ``__spec__`` and ``__name__``
    untouched) is what ``import monarch.X`` gives; the placeholder module made by
    the default ``create_module`` is dropped.
    """

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        from monarch_cy.compat import _paths
        real = importlib.import_module(self.target)
        sys.modules[module.__name__] = real
        _paths.warn_deprecated(module.__name__)

    def __repr__(self) -> str:
        return f"<monarch_cy.compat alias loader for {self.target!r}>"


class _ShimLoader:
    """Loads ``monarch.X`` as a module made by :func:`._paths.make_shim`."""

    def create_module(self, spec):
        from monarch_cy.compat import _paths
        return _paths.make_shim(spec.name)

    def exec_module(self, module) -> None:
        from monarch_cy.compat import _paths
        _paths.warn_deprecated(module.__name__)

    def __repr__(self) -> str:
        return "<monarch_cy.compat shim loader>"


class CompatFinder:
    """Resolves every ``monarch`` / ``monarch.*`` import (see the module docstring)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "monarch" and not fullname.startswith("monarch."):
            return None
        from monarch_cy.compat import _paths
        real = _paths.ALIASES.get(fullname) or _paths.prefer(fullname)
        if real is not None:
            loader = _AliasLoader(real)
        elif fullname in _paths.SHIMS or fullname in _paths.PACKAGES:
            loader = _ShimLoader()
        else:
            raise _paths.not_provided(fullname)
        return importlib.machinery.ModuleSpec(fullname, loader, is_package=True)

    def invalidate_caches(self) -> None:
        pass

    def __repr__(self) -> str:
        return "<monarch_cy.compat.CompatFinder>"


def _ours(mod) -> bool:
    if getattr(mod, "__monarch_cy_compat__", False) is True:
        return True
    name = getattr(mod, "__name__", "")
    return name == "monarch_cy" or name.startswith("monarch_cy.")


def real_monarch() -> str | None:
    """Describe the real Monarch installed here (its distribution, or the location of
    an importable ``monarch`` package that is not ours), or None."""
    loaded = sys.modules.get("monarch")
    if loaded is not None and not _ours(loaded):
        return (f"a 'monarch' module is already imported from "
                f"{getattr(loaded, '__file__', None) or loaded!r}")
    import importlib.metadata as md
    for dist in REAL_DISTRIBUTIONS:
        try:
            d = md.distribution(dist)
        except md.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - broken metadata still means installed
            return f"the {dist!r} distribution is installed"
        where = getattr(d, "_path", None)
        return f"the {dist!r} distribution {d.version} is installed" + (
            f" ({where})" if where else "")
    spec = None
    try:
        spec = importlib.machinery.PathFinder.find_spec("monarch")
    except (ImportError, ValueError):
        pass
    if spec is not None:
        where = spec.origin or ", ".join(spec.submodule_search_locations or ()) or "?"
        return f"a 'monarch' package is importable from {where}"
    return None


def install(*, shadow: bool = False) -> None:
    """Make ``import monarch.actor`` (``.rdma``, ``.job``, ``.spmd``, ``.config``...)
    give monarch_cy's modules.  Idempotent.

    Raises ``RuntimeError`` when the real Monarch is installed in this environment
    (it would be ambiguous which one a program gets), unless ``shadow=True``: then
    ours wins over it in this process.  A real ``monarch`` already *imported* is
    refused either way (its objects are live; import monarch_cy.compat first).
    """
    global _finder
    with _lock:
        if _finder is not None:
            if _finder in sys.meta_path:
                return
            _finder = None           # someone removed it from sys.meta_path
        loaded = sys.modules.get("monarch")
        if loaded is not None and not _ours(loaded):
            raise RuntimeError(
                "monarch_cy.compat.install(): the real Monarch is already imported "
                f"({getattr(loaded, '__file__', None) or loaded!r}); install() must run "
                "before anything imports monarch")
        if not shadow:
            found = real_monarch()
            if found is not None:
                raise RuntimeError(
                    f"monarch_cy.compat.install() refused: the real Monarch is "
                    f"installed ({found}), so 'import monarch' would be ambiguous. "
                    "Uninstall torchmonarch, use another environment, or call "
                    "install(shadow=True) (python -m monarch_cy.compat --shadow ...) "
                    "to make monarch_cy's modules win over it in this process.")
        f = CompatFinder()
        sys.meta_path.insert(0, f)
        _finder = f


def installed() -> bool:
    """Whether :func:`install` is in effect in this process."""
    f = _finder
    return f is not None and f in sys.meta_path


def uninstall() -> None:
    """Undo :func:`install` (for tests): remove the finder and forget the ``monarch``
    aliases in ``sys.modules`` (and the attributes the import system set for them on
    monarch_cy's modules); monarch_cy's own modules stay imported."""
    global _finder
    with _lock:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, CompatFinder)]
        _finder = None
        names = [n for n in sys.modules if (n == "monarch" or n.startswith("monarch."))
                 and _ours(sys.modules[n])]
        for name in names:
            mod = sys.modules[name]
            parent_name, _, child = name.rpartition(".")
            parent = sys.modules.get(parent_name) if parent_name else None
            if (parent is not None and _ours(parent) and parent.__dict__.get(child) is mod
                    and getattr(mod, "__name__", "") != f"{parent.__name__}.{child}"):
                del parent.__dict__[child]
        for name in names:
            del sys.modules[name]


def load_ipython_extension(ipython) -> None:
    """``%load_ext monarch_cy.compat``: :func:`install` in the kernel."""
    install()
