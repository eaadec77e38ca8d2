"""Finding and opening a vendor library at run time: what every Python loader shares.

The loaders -- :mod:`monarch_cy._runtime` (libcudart / libamdhip64) and
:mod:`monarch_cy._collectives._nccl_loader` (NCCL / RCCL) -- each list the places
their library may be, in order, as :class:`Candidate` s, using the helpers here,
then hand the list to :func:`first_usable`, which opens them in turn and keeps one
line per place that did not work.  What a loader adds is its own: sonames, its
environment override, the platform order, the probe (symbols, version) and the
binding.  The verbs tier (``monarch_cy._rdma``) does not use this module: it has one
place to try (``libibverbs.so.1`` through the dynamic loader's path) and must
``dlopen`` it in C to fill its C table.

Sources, in the order the loaders list them (``Candidate.source``):

``env``             the loader's override variable: that file, nothing else
``already loaded``  a copy mapped into this process (torch's), reopened with
                    ``RTLD_NOLOAD`` so a second copy is never loaded beside it
``torch``           the copy bundled with torch, found without importing torch
``system``          bare sonames (the dynamic loader's path), then the toolkit's
                    ``lib64``/``lib`` under ``CUDA_HOME``/``CUDA_PATH`` (then
                    ``/usr/local/cuda``) or ``ROCM_PATH`` (then ``/opt/rocm``)
``pip wheel``       pip's nvidia wheels on ``sys.path``

This module reads no monarch_cy setting: the override's value is read by the
loader.  ``CUDA_HOME``, ``CUDA_PATH`` and ``ROCM_PATH`` are read at each call.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

__all__ = [
    "PLATFORMS",
    "Candidate",
    "torch_dir",
    "torch_platform",
    "auto_platform_order",
    "loaded_files",
    "site_dirs",
    "torch_lib_files",
    "system_candidates",
    "unique_candidates",
    "open_candidate",
    "first_usable",
]

PLATFORMS = ("cuda", "rocm")
_HOMES = {"cuda": (("CUDA_HOME", "CUDA_PATH"), "/usr/local/cuda"), "rocm": (("ROCM_PATH",), "/opt/rocm")}

T = TypeVar("T")


@dataclass(frozen=True)
class Candidate:
    """One place a library may be: a file path or a bare soname.

    ``platform`` is ``cuda``, ``rocm``, or ``auto`` (an override: read off the
    library once opened); ``source`` is one of the sources above.
    """

    platform: str
    location: str
    source: str  # "env", "already loaded", "torch", "system", "pip wheel"

    def describe(self) -> str:
        return f"{self.source}: {self.location} ({self.platform})"


def torch_dir() -> Path | None:
    """torch's package folder, found without importing torch (None without torch)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def torch_platform(tdir: Path | None) -> str | None:
    """cuda / rocm / None: what torch was built for, read from torch/version.py."""
    if tdir is None:
        return None
    try:
        text = (tdir / "version.py").read_text()
    except OSError:
        return None
    if re.search(r"^hip\s*(:\s*\S+)?\s*=\s*['\"]", text, re.M):
        return "rocm"
    if re.search(r"^cuda\s*(:\s*\S+)?\s*=\s*['\"]", text, re.M):
        return "cuda"
    return None


def auto_platform_order(tdir: Path | None) -> list[str]:
    """Both platforms, the likelier first: torch's build, else the one whose driver
    device exists (``/dev/kfd`` without ``/dev/nvidiactl`` means ROCm), else CUDA."""
    first = torch_platform(tdir)
    if first is None:
        first = "rocm" if os.path.exists("/dev/kfd") and not os.path.exists("/dev/nvidiactl") else "cuda"
    return [first] + [p for p in PLATFORMS if p != first]


def loaded_files(prefix: str) -> list[str]:
    """Paths of files mapped into this process whose name starts with ``prefix``."""
    out: list[str] = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                path = fields[5] if len(fields) >= 6 else ""
                if os.path.basename(path).startswith(prefix) and path not in out:
                    out.append(path)
    except OSError:
        pass
    return out


def site_dirs() -> list[Path]:
    """The folders of ``sys.path`` (where pip's wheels are)."""
    return [Path(p) for p in sys.path if p and os.path.isdir(p)]


def torch_lib_files(tdir: Path | None, pattern: str) -> list[str]:
    """Files in torch's ``lib`` folder matching ``pattern``, sorted."""
    if tdir is None:
        return []
    return sorted(glob.glob(str(tdir / "lib" / pattern)))


def system_candidates(platform: str, sonames: tuple[str, ...]) -> list[Candidate]:
    """``platform``'s system places: each bare soname, then each soname that exists
    under the toolkit homes (the env variables', then the default), ``lib64`` first."""
    out = [Candidate(platform, so, "system") for so in sonames]
    variables, default = _HOMES[platform]
    for home in [os.environ.get(v) for v in variables] + [default]:
        if not home:
            continue
        for libdir in ("lib64", "lib"):
            for so in sonames:
                f = os.path.join(home, libdir, so)
                if os.path.exists(f):
                    out.append(Candidate(platform, f, "system"))
    return out


def unique_candidates(cands: list[Candidate]) -> list[Candidate]:
    """``cands`` without repeats (same platform and file, after resolving links), in order."""
    seen: set[tuple[str, str]] = set()
    unique = []
    for c in cands:
        key = (c.platform, os.path.realpath(c.location) if os.sep in c.location else c.location)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def open_candidate(c: Candidate) -> ctypes.CDLL:
    """``dlopen`` ``c`` (``RTLD_NOLOAD`` for a copy already loaded); ``OSError`` if it fails."""
    if c.source == "already loaded":
        return ctypes.CDLL(c.location, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    return ctypes.CDLL(c.location)


def first_usable(
    cands: list[Candidate],
    probe: Callable[[Candidate, ctypes.CDLL], T],
    tried: list[str],
    unusable: tuple[type[BaseException], ...] = (LookupError, ValueError, AttributeError),
) -> tuple[Candidate, ctypes.CDLL, T] | None:
    """The first candidate that opens and passes ``probe``, with its handle and what
    ``probe`` returned; ``None`` when none does.

    Appends one line to ``tried`` per candidate refused, in order:
    ``"<describe()>: cannot open (<dlopen's reason>)"`` or ``"<describe()>: opened
    but not usable (<reason>)"`` (``probe`` raised one of ``unusable``; anything
    else propagates).  The caller binds the one found and adds its own line.
    """
    for c in cands:
        try:
            lib = open_candidate(c)
        except OSError as e:
            tried.append(f"{c.describe()}: cannot open ({e})")
            continue
        try:
            result = probe(c, lib)
        except unusable as e:
            tried.append(f"{c.describe()}: opened but not usable ({e})")
            continue
        return c, lib, result
    return None
