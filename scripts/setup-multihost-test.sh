#!/usr/bin/env bash
# Install, as root with apt, what the multi-host tests (tests/hosts/) need:
#   slurm-wlm      slurmctld, slurmd, sbatch/srun/scancel/squeue (SlurmJob tests)
#   munge          SLURM's authentication daemon
#   iproute2       `ip netns`, veth pairs and a bridge (the fake hosts)
#   util-linux     nsenter and unshare (entering namespaces, a hostname per host)
# Not root or no apt: prints what is missing and exits 0 (those tests then skip with the
# reason).  Exit status is non-zero only when apt itself fails.
set -euo pipefail

exec "$(dirname "$0")/apt-ensure.sh" setup-multihost-test "the multi-host tests" slurm-wlm munge iproute2 util-linux
