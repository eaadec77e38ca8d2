"""The soft-RoCE guest fixture: one boot per test session, shared by two folders.

Real verbs are hardware the CI machine lacks, so they are a fixture, not a
folder: ``tests/conftest.py`` imports ``rdma_guest`` from here (a session
fixture must live in a common ancestor conftest, or each folder would boot its
own guest), and the tests that need it sit beside the tests of their modules:
``tests/verbs/test_verbs_guest.py`` and ``tests/rdma_buffer/test_buffer_guest.py``.

``rdma_guest`` boots the qemu guest of ``_soft_roce_guest.py`` once and runs two jobs of
checks there: ``verbs/guest_checks.py`` (the verbs tier, asserted by
``test_verbs_guest.py``), then ``rdma_buffer/guest_rdma_buffer.py`` (``RDMABuffer`` over the
``ibverbs`` backend through the actor runtime, asserted by
``test_rdma_buffer_guest.py``); it returns both results.  It skips, with the reason,
where the guest cannot be had (no qemu, busybox-static, depmod or kernel
package: ``scripts/setup-rdma-test.sh`` installs them) or where it is switched
off (``MONARCH_CY_RDMA_GUEST=0``).  A guest that boots but does not produce
results is a failure, with the job's log and the console in the message.

Topology inside the guest (nothing leaves it: qemu runs with ``-nic none``):
two veth pairs join the guest's initial namespace to a router namespace
``mcyr``; ``rxe0`` sits on ``mcya0`` (10.91.1.1), ``rxe1`` on ``mcyb0``
(10.91.2.1), and policy routing sends traffic between the two addresses out
through ``mcyr`` and back, so RoCE packets really cross the veth links (the
6.1 kernel's rxe keeps its UDP socket in the initial namespace, so the rxe
netdevs must live there).  The owner process uses ``rxe0``, the client ``rxe1``;
in the ``RDMABuffer`` job, the owner procs use ``rxe0``, the reader proc and the
controller ``rxe1``.

Environment: ``MONARCH_CY_RDMA_GUEST_TIMEOUT`` (seconds, default 420) bounds
the whole boot; ``MONARCH_CY_RDMA_GUEST_CACHE`` moves the image cache.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

import _soft_roce_guest as _guest  # noqa: E402

GUEST_JOB = r"""
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin PYTHONDONTWRITEBYTECODE=1 TMPDIR=/var/tmp HOME=/var/tmp
step() { echo "[job] $*"; "$@" || { echo "[job] FAILED: $*"; exit 90; }; }
step ip link set lo up
step ip netns add mcyr
step ip link add mcya0 type veth peer name mcya1
step ip link add mcyb0 type veth peer name mcyb1
step ip link set mcya1 netns mcyr
step ip link set mcyb1 netns mcyr
step ip addr add 10.91.1.1/24 dev mcya0
step ip addr add 10.91.2.1/24 dev mcyb0
step ip link set mcya0 up
step ip link set mcyb0 up
step ip -n mcyr addr add 10.91.1.2/24 dev mcya1
step ip -n mcyr addr add 10.91.2.2/24 dev mcyb1
step ip -n mcyr link set mcya1 up
step ip -n mcyr link set mcyb1 up
step ip netns exec mcyr sysctl -qw net.ipv4.ip_forward=1
for i in all default mcya0 mcyb0; do
    step sysctl -qw net.ipv4.conf.$i.rp_filter=0 net.ipv4.conf.$i.accept_local=1
done
step ip route add 10.91.2.1/32 via 10.91.1.2 dev mcya0 table 100
step ip route add 10.91.1.1/32 via 10.91.2.2 dev mcyb0 table 100
step ip rule add pref 500 iif lo lookup 100
step ip rule add pref 1000 lookup local
step ip rule del pref 0
step rdma link add rxe0 type rxe netdev mcya0
step rdma link add rxe1 type rxe netdev mcyb0
rdma link
echo "[job] running the checks"
timeout {check_timeout} {python} {checks} "$OUT/results.json" --device-a rxe0 --device-b rxe1
echo "checks exit status $?"
cat /sys/class/net/mcya0/statistics/tx_bytes > "$OUT/veth_a_tx_bytes"
cat /sys/class/net/mcya0/statistics/rx_bytes > "$OUT/veth_a_rx_bytes"
echo "[job] running the RDMABuffer checks"
timeout {check_timeout} {python} {buffer_checks} "$OUT/buffer_results.json" \
    --owner-device rxe0 --reader-device rxe1 --owner-link mcya0
echo "RDMABuffer checks exit status $?"
"""

# Host paths the guest cannot see through its chroot (tmpfs mounted over them there).
_HIDDEN_IN_GUEST = ("/var/tmp", "/run", "/proc", "/sys", "/dev")


@dataclass
class GuestRun:
    results: dict
    log: str
    console: str
    seconds: float
    veth_bytes: tuple[int, int]   # (tx, rx) of mcya0 after guest_checks.py: the owner's link
    buffer_results: dict          # guest_rdma_buffer.py's results ({} if it wrote none)


def _hidden(path: str) -> bool:
    return any(path == h or path.startswith(h + "/") for h in _HIDDEN_IN_GUEST)


@pytest.fixture(scope="session")
def rdma_guest() -> GuestRun:
    if os.environ.get("MONARCH_CY_RDMA_GUEST", "1").strip() in ("0", "no", "off", "false"):
        pytest.skip("soft-RoCE guest switched off (MONARCH_CY_RDMA_GUEST=0)")
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        pytest.skip("the soft-RoCE guest needs an x86_64 Linux host")
    for path in (sys.executable, str(REPO)):
        if _hidden(path):
            pytest.skip(f"{path} lies under a path the guest overlays ({_HIDDEN_IN_GUEST}); "
                        "run the tests from a venv and checkout elsewhere")
    try:
        image = _guest.build_image()
    except _guest.GuestUnavailable as e:
        pytest.skip(f"soft-RoCE guest unavailable: {e}")
    timeout = float(os.environ.get("MONARCH_CY_RDMA_GUEST_TIMEOUT", "420"))
    job = (GUEST_JOB.replace("{python}", sys.executable)
           .replace("{checks}", str(HERE / "verbs" / "guest_checks.py"))
           .replace("{buffer_checks}", str(HERE / "rdma_buffer" / "guest_rdma_buffer.py"))
           .replace("{check_timeout}", str(int(max(30, (timeout - 60) / 2)))))
    run = _guest.run_job(image, job, timeout=timeout)
    try:
        results_file = run.out / "results.json"
        if not results_file.exists():
            where = "timed out" if run.returncode is None else f"job exit status {run.returncode}"
            pytest.fail(
                f"the soft-RoCE guest produced no results ({where}, {run.seconds:.0f} s)\n"
                f"--- job log (tail)\n{run.log[-4000:]}\n--- console (tail)\n{run.console[-2000:]}",
                pytrace=False)
        results = json.loads(results_file.read_text())

        def counter(name: str) -> int:
            p = run.out / name
            return int(p.read_text().strip()) if p.exists() else -1

        buffer_file = run.out / "buffer_results.json"
        buffer_results = json.loads(buffer_file.read_text()) if buffer_file.exists() else {}
        guest = GuestRun(results, run.log, run.console, run.seconds,
                         (counter("veth_a_tx_bytes"), counter("veth_a_rx_bytes")),
                         buffer_results)
        # Shown with `pytest -s`: what ran in the guest, in one line per check.
        print(f"\n[rdma guest] boot + checks: {run.seconds:.1f} s; owner's veth tx/rx bytes: "
              f"{guest.veth_bytes}")
        for name, r in results.items():
            print(f"[rdma guest] {name}: {'ok' if r['ok'] else 'FAILED'}: {r['detail'][:400]}")
        for name, r in buffer_results.items():
            print(f"[rdma guest] RDMABuffer {name}: {'ok' if r['ok'] else 'FAILED'} "
                  f"({r['seconds']} s): {r['detail'][:400]}")
        return guest
    finally:
        shutil.rmtree(run.out, ignore_errors=True)
