#!/usr/bin/env bash
# Install, as root with apt, what the RCCL chroot test (tests/collectives/test_rccl_chroot.py) needs:
#   debootstrap              builds the `--variant=minbase trixie` chroot that holds Debian's librccl1
#   debian-archive-keyring   verifies trixie's Release file
#   gcc, libc6-dev           compile the small C loader (tests/collectives/rccl/rccl_probe.c) here
# The chroot itself (and librccl1 in it) is built by the test, once, cached under /var/tmp.
#
# Not root or no apt: prints what is missing and exits 0 (the test then skips with the reason).
# Exit status is non-zero only when apt itself fails.
set -euo pipefail

exec "$(dirname "$0")/apt-ensure.sh" setup-rccl-test "the RCCL chroot test" debootstrap debian-archive-keyring gcc libc6-dev
