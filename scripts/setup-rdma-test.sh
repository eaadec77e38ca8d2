#!/usr/bin/env bash
# Install, as root with apt, what the soft-RoCE test harness (tests/rdma/) needs:
#   qemu-system-x86 (no recommends)   boots the test guest (software emulation, -accel tcg)
#   busybox-static, cpio, kmod         build the guest's initramfs (busybox, archive, depmod)
#   rdma-core, ibverbs-utils           the `rdma` link tool and verbs utilities used in the guest
#   ibverbs-providers                  librxe (the soft-RoCE user-space provider)
#   libibverbs-dev                     real verbs.h, to prove monarch_cy/include/mcy_verbs.h
#   python3-pyverbs                    rdma-core's bindings: an independent cross-check in the guest
# The guest kernel (Debian's linux-image-6.1.0-*-amd64) is fetched by the harness itself with
# `apt-get download` and cached; nothing here installs a kernel.
#
# Idempotent and quick: when everything is present it only checks (no apt-get update).
# Not root or no apt: prints what is missing and exits 0 (the RDMA guest tests then skip with
# the reason).  Exit status is non-zero only when apt itself fails.
set -euo pipefail

pkgs=(qemu-system-x86 busybox-static cpio kmod rdma-core ibverbs-utils ibverbs-providers
      libibverbs-dev python3-pyverbs)

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" = 0 ]; then
    echo "[setup-rdma-test] all present: ${pkgs[*]}"
    exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "[setup-rdma-test] not root or no apt-get: missing ${missing[*]}; the RDMA guest tests will skip"
    exit 0
fi

echo "[setup-rdma-test] installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Try without refreshing the lists first (fast); refresh only when that fails.
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "[setup-rdma-test] done"
