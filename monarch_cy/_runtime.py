"""Finding, opening and binding the GPU runtime (libcudart or libamdhip64).

ctypes does the finding and opening only; each symbol's address is handed to
the Cython table in :mod:`monarch_cy._hip_shim`, through which every call then
goes at C speed.  Nothing here runs at ``import monarch_cy``: binding happens on
the first :func:`ensure_bound` (the owning tier calls it).

Order of the search (the first that opens and binds wins):

1. ``MONARCH_CY_GPU_RUNTIME_LIBRARY=/path/to/lib.so``: that file and nothing
   else; its platform is read off its symbols.
2. ``MONARCH_CY_GPU_PLATFORM=cuda|rocm|none`` restricts the platform (``none``
   switches GPU support off; unset or ``auto`` tries both).
3. A runtime already loaded in this process (torch's, typically), reused
   without loading anything, so a second CUDA or HIP runtime is never loaded.
4. The runtime bundled with torch (``torch/lib``, and the nvidia wheel that a
   CUDA build of torch loads its runtime from), found without importing torch.
5. The system's sonames: ``libcudart.so.13``, ``.12``; ``libamdhip64.so.7``,
   ``.6``, ``.5`` (the loader's path, then ``CUDA_HOME``/``ROCM_PATH``).
6. pip's nvidia wheels (``nvidia/cu13/lib``, ``nvidia/cuda_runtime/lib``).

Where both vendors could match, the platform torch was built for goes first,
then the one whose driver device exists (``/dev/kfd`` for ROCm,
``/dev/nvidiactl`` for CUDA), then CUDA.  Failing everything raises
:class:`~monarch_cy.errors.GpuRuntimeUnavailable` listing every place tried.

What this shares with the NCCL loader (candidates, torch without importing it,
the system's toolkit homes, opening in order and recording each refusal) lives in
:mod:`monarch_cy._loader`.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import threading
import warnings
from dataclasses import dataclass, field

from monarch_cy import _config, _loader
from monarch_cy._loader import Candidate, unique_candidates
from monarch_cy._errors import GpuRuntimeUnavailable, UnprovenRuntimeWarning
from monarch_cy._platform_tables import PlatformTable, proof_gap, table_for

__all__ = [
    "ENV_PLATFORM",
    "ENV_LIBRARY",
    "RuntimeBinding",
    "Candidate",
    "ensure_bound",
    "current",
    "reset",
    "requested_platform",
    "candidates",
]

ENV_PLATFORM = "MONARCH_CY_GPU_PLATFORM"
ENV_LIBRARY = "MONARCH_CY_GPU_RUNTIME_LIBRARY"

_PLATFORMS = ("cuda", "rocm")
_SONAMES = {
    "cuda": ("libcudart.so.13", "libcudart.so.12"),
    "rocm": ("libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"),
}
_FILE_PATTERNS = {"cuda": "libcudart.so*", "rocm": "libamdhip64.so*"}
_CUDART_WHEEL_DIRS = ("nvidia/cu13/lib", "nvidia/cuda_runtime/lib")  # beside torch, or on sys.path


@dataclass(frozen=True)
class RuntimeBinding:
    """The runtime in force: what was bound, from where, at which version."""

    platform: str
    path: str
    source: str
    version: int
    table: PlatformTable
    symbols: dict[str, str] = field(default_factory=dict)
    tried: tuple[str, ...] = ()

    @property
    def proof_gap(self) -> str | None:
        """Why the table is not proven for this runtime's release, or None when it is."""
        return proof_gap(self.platform, self.version)

    @property
    def version_text(self) -> str:
        if self.platform == "cuda":
            return f"{self.version // 1000}.{self.version % 1000 // 10}"
        major, rest = divmod(self.version, 10_000_000)
        return f"{major}.{rest // 100_000}.{rest % 100_000}"


_lock = threading.Lock()
_binding: RuntimeBinding | None = None


def requested_platform() -> str:
    """The platform asked for by ``MONARCH_CY_GPU_PLATFORM``: cuda, rocm, none or auto
    (``ValueError`` quoting any other value; :mod:`monarch_cy._config`)."""
    return _config.gpu_platform()


def current() -> RuntimeBinding | None:
    """The binding in force, or ``None`` before the first :func:`ensure_bound`."""
    return _binding


def reset() -> None:
    """Unbind, so that the next :func:`ensure_bound` searches again (tests use this).

    The library stays loaded in the process: unloading a GPU runtime is unsafe.
    """
    global _binding
    from monarch_cy import _hip_shim

    with _lock:
        _hip_shim.unbind()
        _binding = None


def ensure_bound() -> RuntimeBinding:
    """Bind the runtime on first use and return the binding; thread-safe.

    Raises ``GpuRuntimeUnavailable`` (listing every place tried) when none
    binds, and ``ValueError`` for an unknown ``MONARCH_CY_GPU_PLATFORM``.
    A runtime whose release CI has not proven the tables against binds with an
    :class:`~monarch_cy._errors.UnprovenRuntimeWarning` (once per binding).
    """
    global _binding
    b = _binding
    if b is not None:
        return b
    with _lock:
        if _binding is None:
            _binding = _search_and_bind()
            gap = _binding.proof_gap
            if gap is not None:
                warnings.warn(gap, UnprovenRuntimeWarning, stacklevel=2)
        return _binding


# ------------------------------------------------------------------ search
# The shared part lives in monarch_cy._loader.  These module-level names are what
# candidates() calls, looked up here at each call (tests replace them).

_torch_dir = _loader.torch_dir
_torch_platform = _loader.torch_platform
_site_dirs = _loader.site_dirs
_loaded_files = _loader.loaded_files


def _platform_order(requested: str, torch_dir) -> list[str]:
    if requested in _PLATFORMS:
        return [requested]
    return _loader.auto_platform_order(torch_dir)


def _loaded_runtimes() -> list[tuple[str, str]]:
    """(platform, path) of GPU runtimes already mapped into this process."""
    return [("cuda", p) for p in _loaded_files("libcudart.so")] + [
        ("rocm", p) for p in _loaded_files("libamdhip64.so")
    ]


def candidates(requested: str | None = None) -> list[Candidate]:
    """Every place to try, in order, for the requested platform."""
    requested = requested_platform() if requested is None else requested
    if requested == "none":
        return []
    explicit = _config.gpu_runtime_library()
    if explicit:
        return [Candidate("auto", explicit, "env")]
    torch_dir = _torch_dir()
    order = _platform_order(requested, torch_dir)
    out: list[Candidate] = []
    loaded = _loaded_runtimes()
    for plat in order:
        out += [Candidate(plat, path, "already loaded") for p, path in loaded if p == plat]
    for plat in order:
        if any(p == plat for p, _ in loaded):
            continue  # never load a second copy next to one already mapped
        out += [Candidate(plat, f, "torch") for f in _loader.torch_lib_files(torch_dir, _FILE_PATTERNS[plat])]
        if torch_dir is not None and plat == "cuda" and _torch_platform(torch_dir) == "cuda":
            for sub in _CUDART_WHEEL_DIRS:
                out += [Candidate(plat, f, "torch") for f in _cudart_files(torch_dir.parent / sub)]
    for plat in order:
        if any(p == plat for p, _ in loaded):
            continue
        out += _loader.system_candidates(plat, _SONAMES[plat])
    if "cuda" in order and not any(p == "cuda" for p, _ in loaded):
        for site in _site_dirs():
            for sub in _CUDART_WHEEL_DIRS:
                out += [Candidate("cuda", f, "pip wheel") for f in _cudart_files(site / sub)]
    return unique_candidates(out)


def _cudart_files(d) -> list[str]:
    """libcudart.so.1x files in ``d``, newest soname first."""
    return sorted(glob.glob(str(d / "libcudart.so.1*")), reverse=True)


# ------------------------------------------------------------------ binding


def _platform_of(lib: ctypes.CDLL) -> str:
    for plat, probe in (("rocm", "hipMalloc"), ("cuda", "cudaMalloc")):
        try:
            getattr(lib, probe)
            return plat
        except AttributeError:
            pass
    raise LookupError("exports neither cudaMalloc nor hipMalloc")


def _version(lib: ctypes.CDLL, platform: str, location: str) -> int:
    """The runtime version: asked once through ctypes (bind time, not a hot path)."""
    fn = getattr(lib, "cudaRuntimeGetVersion" if platform == "cuda" else "hipRuntimeGetVersion")
    v = ctypes.c_int(0)
    if fn(ctypes.byref(v)) == 0 and v.value > 0:
        return v.value
    m = re.search(r"\.so\.(\d+)", location)  # fall back on the soname's major version
    if not m:
        raise LookupError("the runtime reports no version and its file name carries none")
    major = int(m.group(1))
    return major * 1000 if platform == "cuda" else major * 10_000_000


def _addresses(lib: ctypes.CDLL, platform: str, table: PlatformTable):
    from monarch_cy import _hip_shim

    addresses, symbols, missing = [], {}, []
    for cuda_name, hip_name in _hip_shim.function_names():
        short = cuda_name[len("cuda"):]
        default = cuda_name if platform == "cuda" else hip_name
        for sym in (*table.symbol_alternatives.get(short, ()), default):
            try:
                fn = getattr(lib, sym)
            except AttributeError:
                continue
            addresses.append(ctypes.cast(fn, ctypes.c_void_p).value)
            symbols[short] = sym
            break
        else:
            missing.append(default)
    if missing:
        raise LookupError("missing symbols: " + ", ".join(missing))
    return addresses, symbols


# Versioned driver symbols to prefer over the plain name.
_DRIVER_ALTERNATIVES = {"cuMemGetAddressRange": ("cuMemGetAddressRange_v2",)}


def _bind_driver(lib: ctypes.CDLL, platform: str) -> str:
    """Bind the optional driver-level table; returns where it came from."""
    from monarch_cy import _hip_shim

    if platform == "cuda":
        loaded = [p for p in _loaded_files("libcuda.so")]
        try:
            drv = ctypes.CDLL(loaded[0], mode=os.RTLD_NOLOAD | os.RTLD_LAZY) if loaded else ctypes.CDLL("libcuda.so.1")
            where = loaded[0] if loaded else "libcuda.so.1"
        except OSError:
            _hip_shim.bind_driver([0] * len(_hip_shim.driver_function_names()), "libcuda.so.1 (not installed)")
            return "libcuda.so.1 not found"
    else:
        drv, where = lib, "the HIP runtime"
    addresses = []
    for cu_name, hip_name in _hip_shim.driver_function_names():
        names = (*_DRIVER_ALTERNATIVES.get(cu_name, ()), cu_name) if platform == "cuda" else (hip_name,)
        addr = 0
        for sym in names:
            try:
                addr = ctypes.cast(getattr(drv, sym), ctypes.c_void_p).value
                break
            except AttributeError:
                continue
        addresses.append(addr)
    _hip_shim.bind_driver(addresses, where)
    return where


def _library_path(lib: ctypes.CDLL, fallback: str) -> str:
    """The file a handle came from, as the dynamic loader resolved it."""
    for plat, path in _loaded_runtimes():
        if os.path.basename(path).split(".so")[0] == os.path.basename(fallback).split(".so")[0]:
            return path
    return fallback


def _search_and_bind() -> RuntimeBinding:
    from monarch_cy import _hip_shim

    requested = requested_platform()
    if requested == "none":
        raise GpuRuntimeUnavailable(f"GPU support is switched off ({ENV_PLATFORM}=none)")

    def probe(c: Candidate, lib: ctypes.CDLL):
        platform = _platform_of(lib) if c.platform == "auto" else c.platform
        if requested in _PLATFORMS and platform != requested:
            raise LookupError(f"it is a {platform} runtime, but {ENV_PLATFORM}={requested}")
        version = _version(lib, platform, c.location)
        table = table_for(platform, version)
        return (platform, version, table, *_addresses(lib, platform, table))

    tried: list[str] = []
    found = _loader.first_usable(candidates(requested), probe, tried,
                                 unusable=(LookupError, ValueError, AttributeError))
    if found is not None:
        c, lib, (platform, version, table, addresses, symbols) = found
        _hip_shim.bind(platform, addresses, table)
        try:
            _bind_driver(lib, platform)
        except Exception:  # never leave the shim bound without a binding recorded
            _hip_shim.unbind()
            raise
        tried.append(f"{c.describe()}: bound")
        path = c.location if os.sep in c.location else _library_path(lib, c.location)
        return RuntimeBinding(platform, path, c.source, version, table, symbols, tuple(tried))
    where = "" if requested == "auto" else f" for {ENV_PLATFORM}={requested}"
    raise GpuRuntimeUnavailable(
        f"no GPU runtime (libcudart or libamdhip64) could be bound{where}", tuple(tried) or (
            "nothing to try: no runtime is loaded, bundled with torch, installed "
            "system-wide or in pip's nvidia wheels",
        )
    )
