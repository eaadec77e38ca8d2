"""Debian chroots the suite builds for itself: built once with debootstrap, cached, run in.

Used by the RCCL test (trixie with ``librccl1``) and the wheel test (bookworm with a
Python and no C compiler).  A chroot is built into a temporary folder inside its
cache and renamed into place only when complete, with a marker naming the packages
it holds, so a half-built one is never used; builds are serialized by a lock file.
Everything runs in a private mount namespace (``unshare --mount``): the ``/proc``,
``/dev`` and ``/sys`` mounted for the chroot vanish with the command, even when it
is killed, and nothing is ever deleted through a mount.  Needs root, ``debootstrap``,
``unshare`` and ``chroot`` (``scripts/setup-rccl-test.sh`` installs them).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from monarch_cy import _config

READY = ".monarch_cy-ready"
TOOLS = ("debootstrap", "unshare", "chroot")


def mirror() -> str:
    """The Debian archive this machine's apt uses (deb.debian.org when none is found)."""
    env = _config.get("MONARCH_CY_DEBIAN_MIRROR")
    if env:
        return env
    texts = []
    for p in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            texts.append(p.read_text())
        except OSError:
            pass
    for text in texts:
        for m in re.finditer(r"(?:^URIs:|^deb(?:\s+\[[^]]*\])?)\s+(\S+)", text, re.M):
            uri = m.group(1).rstrip("/")
            if uri.startswith(("http://", "https://")) and uri.endswith("/debian"):
                return uri
    return "http://deb.debian.org/debian"


def mounts_under(path: Path) -> list[str]:
    prefix = str(path).rstrip("/") + "/"
    with open("/proc/self/mounts") as f:
        return [line.split()[1] for line in f if (line.split()[1] + "/").startswith(prefix)]


def remove_tree(path: Path) -> None:
    """rm -rf, refusing when anything is mounted below (never delete through a bind mount)."""
    if not path.exists():
        return
    left = mounts_under(path)
    if left:
        raise RuntimeError(f"refusing to remove {path}: still mounted there: {left}")
    shutil.rmtree(path, ignore_errors=True)


def missing_tools() -> list[str]:
    """Why no chroot can be built here, as a list of missing things (empty: it can)."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if os.geteuid() != 0:
        missing.insert(0, "root")
    return missing


def _build(cache: Path, suite: str, packages: tuple[str, ...], timeout: float,
           must_exist: str) -> float:
    tmp = cache / f"root.tmp-{os.getpid()}"
    remove_tree(tmp)
    log = cache / "debootstrap.log"
    cmd = ["unshare", "--mount", "--propagation", "private", "debootstrap", "--variant=minbase",
           "--include=" + ",".join(packages), suite, str(tmp), mirror()]
    t0 = time.monotonic()
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            remove_tree(tmp)
            raise RuntimeError(f"debootstrap took over {timeout:g} s (log: {log})") from None
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        remove_tree(tmp)
        raise RuntimeError(f"debootstrap failed (exit {rc}; log {log}): " + " | ".join(tail))
    if not (tmp / must_exist.lstrip("/")).exists():
        remove_tree(tmp)
        raise RuntimeError(f"debootstrap finished but {must_exist} is missing (log: {log})")
    (tmp / READY).write_text(" ".join(packages) + "\n")
    remove_tree(cache / "root")
    tmp.rename(cache / "root")
    return time.monotonic() - t0


def ensure(cache: Path, suite: str, packages: tuple[str, ...], *, timeout: float,
           must_exist: str) -> tuple[Path, float | None]:
    """``(root, seconds the build took or None if cached)`` of the chroot in ``cache``.

    Builds ``debootstrap --variant=minbase --include=<packages> <suite>`` on first use
    (or when the cached one holds other packages); raises ``RuntimeError`` with the
    reason (and debootstrap's log) when that fails or runs over ``timeout``.
    """
    cache.mkdir(parents=True, exist_ok=True)
    root = cache / "root"
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others wait and reuse
        marker = root / READY
        if marker.is_file() and marker.read_text().split() == list(packages):
            return root, None
        return root, _build(cache, suite, packages, timeout, must_exist)


def run(root: Path, argv: list[str], env: dict[str, str] | None = None, timeout: float = 60):
    """Run argv in the chroot, with /proc, /dev and /sys mounted in a private mount namespace."""
    script = (
        'set -e; R="$1"; shift; mount -t proc proc "$R/proc"; mount --rbind /dev "$R/dev"; '
        'mount --rbind /sys "$R/sys"; exec chroot "$R" "$@"'
    )
    e = ["env", "-i", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"] + [f"{k}={v}" for k, v in (env or {}).items()]
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(root), *e, *argv]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert not mounts_under(root), "a mount leaked out of the private namespace"
    return r
