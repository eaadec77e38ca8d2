"""Build and drive ``fake_cudart.c``, the test-only fake CUDA runtime.

The fake lets CPU-only CI exercise the GPU shim's error and lifetime paths for
real (see the comment at the top of ``fake_cudart.c`` for its semantics).  It
never stands in for the GPU run.

A dlopen'd library cannot be unloaded and the fake's counters are per process,
so every test runs its scenario in a fresh interpreter: :meth:`FakeCudart.run`
executes a snippet with ``MONARCH_CY_GPU_RUNTIME_LIBRARY`` pointing at the fake
and returns what the snippet passed to ``emit()``, decoded from JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).with_name("fake_cudart.c")
REPO = Path(__file__).resolve().parents[2]
LIB_NAME = "libfake_cudart.so"
_MARK = "@@FAKE_CUDART_JSON@@"

# Every env variable that changes how the fake or the loader behaves: scrubbed
# from the parent's environment so that each snippet starts from known defaults.
_SCRUB = (
    "MONARCH_CY_GPU_RUNTIME_LIBRARY",
    "MONARCH_CY_GPU_PLATFORM",
    "FAKE_CUDART_DEVICES",
    "FAKE_CUDART_MEM_LIMIT",
    "FAKE_CUDART_FAIL",
    "FAKE_CUDART_SLEEP_MS",
    "FAKE_CUDART_VERSION",
)

# Run before each snippet: imports, and small helpers the snippets share.
PRELUDE = f'''
import ctypes, json, os, pickle, sys
from monarch_cy import _hip_shim as shim, _runtime as rt
from monarch_cy import errors

FAKE_PATH = os.environ["FAKE_CUDART_PATH"]
COUNTERS = ("allocations", "host_allocations", "registrations", "ipc_mappings", "streams", "events")

def lib():
    """The fake, through ctypes (the copy already loaded, if any: dlopen refcounts)."""
    return ctypes.CDLL(FAKE_PATH)

def live():
    """The fake's live-object counters in this process."""
    l = lib()
    return {{k: getattr(l, "fake_live_" + k)() for k in COUNTERS}}

def fail(name, status, times=1):
    """Make cuda<name> return status on its next `times` calls."""
    lib().fake_fail(name.encode(), status, times)

def err(fn, *args, **kwargs):
    """Call fn; describe the exception it raised, or None."""
    try:
        fn(*args, **kwargs)
    except BaseException as e:
        return {{
            "type": type(e).__name__,
            "mro": [c.__name__ for c in type(e).__mro__],
            "text": str(e),
            "status": getattr(e, "status", None),
            "name": getattr(e, "name", None),
            "call": getattr(e, "call", None),
            "pickle": pickle.dumps(e).hex(),
        }}
    return None

def emit(obj):
    print("{_MARK}" + json.dumps(obj), flush=True)
'''


class SnippetFailed(AssertionError):
    """A snippet exited non-zero or emitted nothing."""


@dataclass(frozen=True)
class FakeCudart:
    """The built fake: its path, and a way to run code against it in a new process."""

    path: Path

    def env(self, bind: bool = True, **extra: str | None) -> dict[str, str]:
        """The child's environment: scrubbed, the repo importable, then ``extra``.

        ``bind`` sets ``MONARCH_CY_GPU_RUNTIME_LIBRARY`` to the fake; an
        ``extra`` value of ``None`` removes that variable.
        """
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        env["FAKE_CUDART_PATH"] = str(self.path)
        if bind:
            env["MONARCH_CY_GPU_RUNTIME_LIBRARY"] = str(self.path)
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
        return env

    def script(self, *codes: str) -> str:
        """PRELUDE, then each piece of code, each dedented on its own."""
        return "\n".join([PRELUDE, *(textwrap.dedent(c) for c in codes)])

    def run(self, *codes: str, bind: bool = True, timeout: float = 30, **extra: str | None):
        """Run ``codes`` (after :data:`PRELUDE`) in a fresh interpreter; return its ``emit()``.

        Raises :class:`SnippetFailed` with the child's output when it exits
        non-zero (a crash included) or emits nothing.
        """
        proc = subprocess.run(
            [sys.executable, "-c", self.script(*codes)],
            cwd=REPO,
            env=self.env(bind, **extra),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        lines = [l for l in proc.stdout.splitlines() if l.startswith(_MARK)]
        if proc.returncode != 0 or not lines:
            raise SnippetFailed(
                f"snippet exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
            )
        return json.loads(lines[-1][len(_MARK):])

    def popen(self, code: str, *, bind: bool = True, **extra: str | None) -> subprocess.Popen:
        """Start ``code`` in a fresh interpreter with pipes on stdin and stdout (text)."""
        return subprocess.Popen(
            [sys.executable, "-c", self.script(code)],
            cwd=REPO,
            env=self.env(bind, **extra),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    @staticmethod
    def build(out_dir: Path, *extra_flags: str, name: str = "libfake_cudart.so") -> Path:
        """Build another copy or variant of the fake (see the module's :func:`build`)."""
        return build(out_dir, *extra_flags, name=name)

    @staticmethod
    def read_emit(line: str):
        """Decode one ``emit()`` line read from a :meth:`popen` child."""
        if not line.startswith(_MARK):
            raise SnippetFailed(f"expected an emit() line, got {line!r}")
        return json.loads(line[len(_MARK):])


def compiler() -> str | None:
    """The C compiler to build the fake with (``$CC`` or gcc), or None."""
    return shutil.which(os.environ.get("CC", "gcc"))


def build(out_dir: Path, *extra_flags: str, name: str = LIB_NAME) -> Path:
    """Compile the fake into ``out_dir/name`` with ``gcc -shared -fPIC -O1``.

    Raises ``RuntimeError`` with the compiler's output when it fails.
    """
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (set CC or install gcc)")
    out = Path(out_dir) / name
    cmd = [cc, "-shared", "-fPIC", "-O1", "-Wall", *extra_flags, "-o", str(out), str(SOURCE), "-lpthread"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the fake CUDA runtime failed: {' '.join(cmd)}\n{proc.stderr}")
    return out
