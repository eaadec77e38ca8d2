#!/usr/bin/env bash
# Install, as root with apt, what the RCCL chroot test (tests/collectives/test_rccl_chroot.py) needs:
#   debootstrap              builds the `--variant=minbase trixie` chroot that holds Debian's librccl1
#   debian-archive-keyring   verifies trixie's Release file
#   gcc, libc6-dev           compile the small C loader (tests/collectives/rccl/rccl_probe.c) here
# The chroot itself (and librccl1 in it) is built by the test, once, cached under /var/tmp.
#
# Idempotent and quick: when everything is present it only checks (no apt-get update).
# Not root or no apt: prints what is missing and exits 0 (the test then skips with the reason).
# Exit status is non-zero only when apt itself fails.
set -euo pipefail

pkgs=(debootstrap debian-archive-keyring gcc libc6-dev)

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" = 0 ]; then
    echo "[setup-rccl-test] all present: ${pkgs[*]}"
    exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "[setup-rccl-test] not root or no apt-get: missing ${missing[*]}; the RCCL chroot test will skip"
    exit 0
fi

echo "[setup-rccl-test] installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Try without refreshing the lists first (fast); refresh only when that fails.
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "[setup-rccl-test] done"
