"""Finding, opening and binding NCCL (CUDA) or RCCL (ROCm).

ctypes finds and opens the library only; each ``nccl*`` symbol's address is
handed to :mod:`monarch_cy._nccl_shim`, through which every call then goes at C
speed.  Nothing here runs at import: :func:`ensure_loaded` binds on first use.

Order of the search (the first that opens, binds and is new enough wins):

1. ``MONARCH_CY_NCCL_LIBRARY=/path/to/libnccl.so.2``: that file, nothing else.
2. A copy already mapped into this process (torch's, typically): reused with
   ``RTLD_NOLOAD``, so that a second NCCL/RCCL is never loaded beside it.
3. The copy bundled with torch (``torch/lib``; on CUDA builds of torch, the
   ``nvidia/nccl/lib`` wheel torch depends on), found without importing torch.
4. The system's soname: ``libnccl.so.2`` on CUDA, ``librccl.so.1`` on ROCm
   (the loader's path, then ``CUDA_HOME``/``ROCM_PATH``).
5. pip's ``nvidia-nccl-cu13``/``-cu12`` wheels (``nvidia/nccl/lib/libnccl.so.2``).

The platform is the one the GPU runtime is bound to (:mod:`monarch_cy._runtime`),
else ``MONARCH_CY_GPU_PLATFORM``, else the one torch was built for, else the one
whose driver device exists, else CUDA first.  A library older than
:data:`MIN_VERSION` is skipped with the reason recorded; failing everything
raises :class:`NcclUnavailable` listing every place tried.

The search machinery it shares with the GPU runtime's loader (candidates, torch's
folder and build platform, the toolkit homes, opening in order and recording each
refusal) lives in :mod:`monarch_cy._loader`.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass

from monarch_cy import _config, _loader, _runtime
from monarch_cy._loader import Candidate
from monarch_cy._errors import NcclUnavailable

__all__ = [
    "ENV_LIBRARY",
    "MIN_VERSION",
    "NcclBinding",
    "Candidate",
    "candidates",
    "ensure_loaded",
    "current",
    "reset",
    "version_code",
    "version_tuple",
]

ENV_LIBRARY = "MONARCH_CY_NCCL_LIBRARY"
MIN_VERSION = (2, 13, 0)  # ncclGetLastError; RCCL 2.13.4 (Debian trixie) is the oldest seen working
_SONAMES = {"cuda": ("libnccl.so.2",), "rocm": ("librccl.so.1",)}
_FILE_PATTERNS = {"cuda": "libnccl.so*", "rocm": "librccl.so*"}
_NCCL_WHEEL_FILE = "nvidia/nccl/lib/libnccl.so.2"  # pip's nvidia-nccl-cu13/-cu12, beside torch or on sys.path


def version_code(major: int, minor: int, patch: int) -> int:
    """NCCL_VERSION(): ``X*1000+Y*100+Z`` up to 2.8, ``X*10000+Y*100+Z`` after."""
    if major <= 2 and minor <= 8:
        return major * 1000 + minor * 100 + patch
    return major * 10000 + minor * 100 + patch


def version_tuple(code: int) -> tuple[int, int, int]:
    """The inverse of :func:`version_code` (22803 -> (2, 28, 3))."""
    if code >= 10000:
        return (code // 10000, code // 100 % 100, code % 100)
    return (code // 1000, code // 100 % 10, code % 100)


@dataclass(frozen=True)
class NcclBinding:
    """The library in force."""

    platform: str  # "cuda" (NCCL) or "rocm" (RCCL)
    path: str
    source: str
    version: int
    missing_optional: tuple[str, ...] = ()
    tried: tuple[str, ...] = ()

    @property
    def version_text(self) -> str:
        return "%d.%d.%d" % version_tuple(self.version)

    @property
    def library(self) -> str:
        return "RCCL" if self.platform == "rocm" else "NCCL"


_lock = threading.Lock()
_binding: NcclBinding | None = None


def current() -> NcclBinding | None:
    return _binding


def reset() -> None:
    """Unbind so that the next :func:`ensure_loaded` searches again (the library stays loaded)."""
    global _binding
    from monarch_cy import _nccl_shim

    with _lock:
        _nccl_shim.unbind()
        _binding = None


def ensure_loaded() -> NcclBinding:
    """Bind NCCL/RCCL on first use and return the binding; thread-safe."""
    global _binding
    b = _binding
    if b is not None:
        return b
    with _lock:
        if _binding is None:
            _binding = _search_and_bind()
        return _binding


def _platform_order() -> list[str]:
    bound = _runtime.current()
    if bound is not None:
        return [bound.platform]
    requested = _runtime.requested_platform()
    if requested in ("cuda", "rocm"):
        return [requested]
    if requested == "none":
        return []
    return _loader.auto_platform_order(_loader.torch_dir())


def _loaded() -> list[tuple[str, str]]:
    """(platform, path) of NCCL/RCCL copies already mapped into this process."""
    return [("cuda", p) for p in _loader.loaded_files("libnccl.so")] + [
        ("rocm", p) for p in _loader.loaded_files("librccl.so")
    ]


def candidates() -> list[Candidate]:
    """Every place to try, in order."""
    explicit = _config.nccl_library()
    if explicit:
        return [Candidate("auto", explicit, "env")]
    order = _platform_order()
    loaded = _loaded()
    out = [Candidate(p, path, "already loaded") for plat in order for p, path in loaded if p == plat]
    unloaded = [p for p in order if not any(q == p for q, _ in loaded)]
    torch_dir = _loader.torch_dir()
    torch_plat = _loader.torch_platform(torch_dir)
    for plat in unloaded:
        out += [Candidate(plat, f, "torch") for f in _loader.torch_lib_files(torch_dir, _FILE_PATTERNS[plat])]
        if torch_dir is not None and plat == "cuda" and torch_plat == "cuda":
            f = torch_dir.parent / _NCCL_WHEEL_FILE
            if f.exists():
                out.append(Candidate(plat, str(f), "torch"))
    for plat in unloaded:
        out += _loader.system_candidates(plat, _SONAMES[plat])
    if "cuda" in unloaded:
        for site in _loader.site_dirs():
            f = site / _NCCL_WHEEL_FILE
            if f.exists():
                out.append(Candidate("cuda", str(f), "pip wheel"))
    return _loader.unique_candidates(out)


def _addresses(lib: ctypes.CDLL) -> tuple[list[int], tuple[str, ...]]:
    from monarch_cy import _nccl_shim

    addresses, missing_required, missing_optional = [], [], []
    for sym, required in _nccl_shim.function_names():
        try:
            addresses.append(ctypes.cast(getattr(lib, sym), ctypes.c_void_p).value)
        except AttributeError:
            addresses.append(0)
            (missing_required if required else missing_optional).append(sym)
    if missing_required:
        raise LookupError("missing symbols: " + ", ".join(missing_required))
    return addresses, tuple(missing_optional)


def _library_version(lib: ctypes.CDLL) -> int:
    v = ctypes.c_int(0)
    if lib.ncclGetVersion(ctypes.byref(v)) != 0 or v.value <= 0:
        raise LookupError("ncclGetVersion failed")
    return v.value


def _search_and_bind() -> NcclBinding:
    from monarch_cy import _nccl_shim

    if not _config.nccl_library() and _runtime.requested_platform() == "none":
        raise NcclUnavailable(f"GPU support is switched off ({_runtime.ENV_PLATFORM}=none)")
    minimum = version_code(*MIN_VERSION)

    def probe(c: Candidate, lib: ctypes.CDLL):
        version = _library_version(lib)
        if version < minimum:
            raise LookupError(
                "version %d.%d.%d is older than the minimum supported %d.%d.%d"
                % (*version_tuple(version), *MIN_VERSION)
            )
        return (version, *_addresses(lib))

    tried: list[str] = []
    found = _loader.first_usable(candidates(), probe, tried, unusable=(LookupError, AttributeError))
    if found is not None:
        c, lib, (version, addresses, missing_optional) = found
        platform = c.platform
        if platform == "auto":
            platform = "rocm" if "rccl" in os.path.basename(c.location) else "cuda"
        _nccl_shim.bind(addresses)
        tried.append(f"{c.describe()}: bound")
        return NcclBinding(platform, c.location, c.source, version, missing_optional, tuple(tried))
    raise NcclUnavailable(
        "no NCCL/RCCL library could be bound (pip install nvidia-nccl-cu13 provides one for CUDA)",
        tuple(tried) or ("nothing to try: no platform is enabled",),
    )
