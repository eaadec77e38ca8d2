"""A throw-away qemu guest with real RDMA verbs (soft-RoCE), for the test suite.

The CI machine's kernel has no RDMA subsystem.  Debian's own kernel package
does (``rdma_rxe``), so the harness boots it under qemu (software emulation,
``-accel tcg``; no network card: ``-nic none``) with:

* an initramfs of ``busybox-static`` plus the kernel modules the guest needs
  (virtio, 9p, veth, crc32, rdma_rxe and what they depend on), built once and
  cached under :data:`CACHE_ROOT` (keyed by the kernel package's version);
* the host's root file system shared read-only over 9p and used as the root of
  a chroot, so the host's Python, venv and built extensions run unchanged;
* a second, writable 9p share (a fresh temp folder per boot) that carries the
  job script in and its results out.

:func:`run_job` boots once, runs one shell script in the chroot and powers off;
a hard wall-clock timeout kills qemu.  Nothing here ever leaves a process
behind: qemu is killed (its whole process group) on timeout or error.

Where something is missing (qemu, busybox, depmod, the kernel package) the
functions raise :class:`GuestUnavailable` naming it; fixtures turn that into a
skip with the reason.
"""

from __future__ import annotations

import fcntl
import gzip
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CACHE_ROOT = Path(os.environ.get("MONARCH_CY_RDMA_GUEST_CACHE", "/var/tmp/monarch_cy-rdma-guest"))
KERNEL_PACKAGE_RE = re.compile(r"^linux-image-6\.1\.0-(\d+)-amd64$")

# Modules loaded in the initramfs, in this order after their dependencies.
WANTED_MODULES = (
    "virtio_pci", "9pnet_virtio", "9p", "crc32_generic", "veth", "ib_uverbs", "rdma_rxe",
)

# The job runs as `sh /var/tmp/mcy-job/job.sh` inside the chroot; OUT is that folder.
GUEST_OUT = "/var/tmp/mcy-job"

_INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "mcy-guest: loading modules"
for m in $(cat /modules.load); do
    insmod "/lib/modules/$m" 2>/dev/null || echo "mcy-guest: insmod $m failed"
done
mkdir -p /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /newroot \
    || { echo "mcy-guest: cannot mount the host root"; poweroff -f; }
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mount -t tmpfs -o mode=1777 tmpfs /newroot/var/tmp
mkdir -p /newroot/var/tmp/mcy-job
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 jobout /newroot/var/tmp/mcy-job \
    || { echo "mcy-guest: cannot mount the job share"; poweroff -f; }
echo "mcy-guest: running job"
chroot /newroot /bin/sh -c 'cd /var/tmp && exec sh /var/tmp/mcy-job/job.sh' \
    >/newroot/var/tmp/mcy-job/job.log 2>&1
echo $? > /newroot/var/tmp/mcy-job/job.rc
sync
umount /newroot/var/tmp/mcy-job
echo "mcy-guest: job done"
poweroff -f
"""


class GuestUnavailable(RuntimeError):
    """The guest cannot be built or booted here; the message says why."""


@dataclass
class GuestImage:
    kernel: Path
    initrd: Path
    version: str


@dataclass
class JobResult:
    returncode: int | None   # the job script's exit status; None if it never finished
    log: str                 # the job's stdout + stderr
    console: str             # the guest's serial console
    out: Path                # the job folder as the host sees it (job files, results)
    seconds: float


def _need_tool(name: str, *candidates: str) -> str:
    for c in (*candidates, name):
        path = c if os.path.isabs(c) else shutil.which(c)
        if path and os.access(path, os.X_OK):
            return path
    raise GuestUnavailable(
        f"{name} not found (install with scripts/setup-rdma-test.sh, as root)"
    )


def _static_busybox() -> str:
    path = _need_tool("busybox", "/bin/busybox", "/usr/bin/busybox")
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    # A dynamically linked ELF names its interpreter; busybox-static's does not.
    if b"/lib64/ld-linux" in head or b"ld-linux-x86-64" in head:
        raise GuestUnavailable(f"{path} is not statically linked (install busybox-static)")
    return path


def qemu_binary() -> str:
    return _need_tool("qemu-system-x86_64")


def _kernel_package() -> str:
    """The newest ``linux-image-6.1.0-N-amd64`` apt knows of."""
    try:
        out = subprocess.run(
            ["apt-cache", "search", "--names-only", r"^linux-image-6\.1\.0-[0-9]+-amd64$"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise GuestUnavailable(f"apt-cache cannot list kernel packages: {e}") from e
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    best = max((n for n in names if KERNEL_PACKAGE_RE.match(n)),
               key=lambda n: int(KERNEL_PACKAGE_RE.match(n).group(1)), default=None)
    if best is None:
        raise GuestUnavailable("apt knows no linux-image-6.1.0-*-amd64 package (Debian 12 lists)")
    return best


def _module_closure(moddir: Path, wanted: tuple[str, ...]) -> list[str]:
    """Module paths (relative to ``moddir``) for ``wanted``, dependencies first."""
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in (moddir / "modules.dep").read_text().splitlines():
        target, _, rest = line.partition(":")
        deps[target] = rest.split()
        by_name[Path(target).name.split(".ko")[0].replace("-", "_")] = target
    builtin = (moddir / "modules.builtin").read_text().split()
    builtin_names = {Path(b).name.split(".ko")[0].replace("-", "_") for b in builtin}
    order: list[str] = []

    def visit(path: str) -> None:
        if path in order:
            return
        # modules.dep lists dependencies already in load order (last loaded first).
        for dep in reversed(deps.get(path, [])):
            visit(dep)
        order.append(path)

    for name in wanted:
        key = name.replace("-", "_")
        if key in builtin_names:
            continue
        if key not in by_name:
            raise GuestUnavailable(f"kernel module {name!r} is missing from {moddir}")
        visit(by_name[key])
    return order


def _write_cpio(tree: Path, dest: Path) -> None:
    cpio = _need_tool("cpio")
    files = subprocess.run(["find", "."], cwd=tree, capture_output=True, text=True,
                           check=True).stdout
    raw = subprocess.run([cpio, "-o", "-H", "newc", "--quiet"], cwd=tree, input=files.encode(),
                         capture_output=True, check=True).stdout
    with gzip.open(dest, "wb", compresslevel=1) as f:
        f.write(raw)


def build_image(cache_root: Path = CACHE_ROOT) -> GuestImage:
    """The kernel and initramfs, built once per kernel version and cached.

    Downloads the kernel package with ``apt-get download`` (about 70 MB), unpacks
    it with ``dpkg-deb -x``, runs ``depmod`` on it, keeps the kernel image and an
    initramfs of busybox plus the needed modules, and deletes the rest.  Safe to
    call from several processes at once (a lock file serializes builds).
    """
    busybox = _static_busybox()
    depmod = _need_tool("depmod", "/sbin/depmod", "/usr/sbin/depmod")
    dpkg_deb = _need_tool("dpkg-deb")
    apt_get = _need_tool("apt-get")
    cache_root.mkdir(parents=True, exist_ok=True)
    with open(cache_root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for done in sorted(cache_root.glob("*/image.ok")):
            d = done.parent
            return GuestImage(d / "vmlinuz", d / "initrd.gz", d.name)
        package = _kernel_package()
        with tempfile.TemporaryDirectory(dir=cache_root, prefix="build-") as tmp:
            t = Path(tmp)
            dl = subprocess.run([apt_get, "download", package], cwd=t, capture_output=True,
                                text=True, timeout=600)
            debs = list(t.glob("*.deb"))
            if dl.returncode != 0 or not debs:
                raise GuestUnavailable(f"apt-get download {package} failed: {dl.stderr.strip()[-400:]}")
            root = t / "root"
            subprocess.run([dpkg_deb, "-x", str(debs[0]), str(root)], check=True, timeout=600)
            version = next((root / "lib" / "modules").iterdir()).name
            subprocess.run([depmod, "-b", str(root), version], check=True, timeout=600)
            moddir = root / "lib" / "modules" / version
            load = _module_closure(moddir, WANTED_MODULES)
            ird = t / "initrd"
            for sub in ("bin", "proc", "sys", "dev", "newroot"):
                (ird / sub).mkdir(parents=True)
            shutil.copy2(busybox, ird / "bin" / "busybox")
            for rel in load:
                dst = ird / "lib" / "modules" / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(moddir / rel, dst)
            (ird / "modules.load").write_text("\n".join(load) + "\n")
            (ird / "init").write_text(_INIT)
            (ird / "init").chmod(0o755)
            final = cache_root / version
            final.mkdir(exist_ok=True)
            _write_cpio(ird, final / "initrd.gz")
            shutil.copy2(root / "boot" / f"vmlinuz-{version}", final / "vmlinuz")
            (final / "image.ok").write_text(package + "\n")
            return GuestImage(final / "vmlinuz", final / "initrd.gz", version)


def run_job(image: GuestImage, script: str, *, timeout: float = 240.0, memory_mb: int = 1024,
            files: dict[str, str] | None = None) -> JobResult:
    """Boot the guest, run ``script`` (POSIX sh) in the host-root chroot, power off.

    The script starts in ``/var/tmp`` with ``$OUT`` naming the job folder
    (``/var/tmp/mcy-job``), which the host reads back as :attr:`JobResult.out`;
    ``files`` are written there before boot.  ``timeout`` bounds the whole boot;
    past it qemu is killed and ``returncode`` is ``None``.  Blocks until the guest
    is gone.  The caller removes :attr:`JobResult.out` when done with it.
    """
    qemu = qemu_binary()
    out = Path(tempfile.mkdtemp(prefix="mcy-rdma-job-"))
    out.chmod(0o777)
    (out / "job.sh").write_text(f"OUT={GUEST_OUT}\nexport OUT\n{script}")
    for name, text in (files or {}).items():
        (out / name).write_text(text)
    console_path = out / "console.log"
    cmd = [
        # -cpu max: every instruction set extension TCG emulates, so the host's
        # compiled packages run (numpy >= 2 needs x86-64-v2; qemu64 lacks SSE4.2).
        qemu, "-accel", "tcg", "-cpu", "max", "-m", str(memory_mb), "-smp", "1", "-nic", "none",
        "-nographic", "-no-reboot", "-monitor", "none",
        "-serial", f"file:{console_path}",
        "-kernel", str(image.kernel), "-initrd", str(image.initrd),
        "-append", "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init",
        "-virtfs", "local,path=/,mount_tag=hostroot,readonly=on,security_model=none,multidevs=remap",
        "-virtfs", f"local,path={out},mount_tag=jobout,security_model=none",
    ]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        qemu_out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        qemu_out, _ = proc.communicate()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    seconds = time.monotonic() - start
    rc_file = out / "job.rc"
    rc = int(rc_file.read_text().strip()) if rc_file.exists() else None
    log = (out / "job.log").read_text(errors="replace") if (out / "job.log").exists() else ""
    console = console_path.read_text(errors="replace") if console_path.exists() else ""
    if qemu_out:
        console += "\n[qemu] " + qemu_out.decode(errors="replace")
    return JobResult(rc, log, console, out, seconds)


def write_results(results: dict, path: str | None) -> int:
    """End of a check script run in the guest: ``{name: {"ok", "detail"}}`` as JSON to
    ``path`` (or stdout); returns the script's exit status (0 when all are ok)."""
    import json
    text = json.dumps(results, indent=1)
    if path:
        Path(path).write_text(text)
    else:
        print(text)
    return 0 if all(r["ok"] for r in results.values()) else 1
