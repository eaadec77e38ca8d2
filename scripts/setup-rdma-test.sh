#!/usr/bin/env bash
# Install, as root with apt, what the soft-RoCE test harness (tests/verbs/ and tests/rdma_buffer/) needs:
#   qemu-system-x86 (no recommends)   boots the test guest (software emulation, -accel tcg)
#   busybox-static, cpio, kmod         build the guest's initramfs (busybox, archive, depmod)
#   rdma-core, ibverbs-utils           the `rdma` link tool and verbs utilities used in the guest
#   ibverbs-providers                  librxe (the soft-RoCE user-space provider)
#   libibverbs-dev                     real verbs.h, to prove monarch_cy/include/mcy_verbs.h
#   python3-pyverbs                    rdma-core's bindings: an independent cross-check in the guest
# The guest kernel (Debian's linux-image-6.1.0-*-amd64) is fetched by the harness itself with
# `apt-get download` and cached; nothing here installs a kernel.
#
# Not root or no apt: prints what is missing and exits 0 (the RDMA guest tests then skip with
# the reason).  Exit status is non-zero only when apt itself fails.
set -euo pipefail

exec "$(dirname "$0")/apt-ensure.sh" setup-rdma-test "the RDMA guest tests" qemu-system-x86 busybox-static cpio kmod rdma-core ibverbs-utils ibverbs-providers libibverbs-dev python3-pyverbs
