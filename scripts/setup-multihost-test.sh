#!/usr/bin/env bash
# Install, as root with apt, what the multi-host tests (tests/hosts/) need:
#   slurm-wlm      slurmctld, slurmd, sbatch/srun/scancel/squeue (SlurmJob tests)
#   munge          SLURM's authentication daemon
#   iproute2       `ip netns`, veth pairs and a bridge (the fake hosts)
#   util-linux     nsenter and unshare (entering namespaces, a hostname per host)
# Idempotent and quick: when everything is present it only checks (no apt-get update).
# Not root or no apt: prints what is missing and exits 0 (those tests then skip with the
# reason).  Exit status is non-zero only when apt itself fails.
set -euo pipefail

pkgs=(slurm-wlm munge iproute2 util-linux)

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" = 0 ]; then
    echo "[setup-multihost-test] all present: ${pkgs[*]}"
    exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "[setup-multihost-test] not root or no apt-get: missing ${missing[*]}; the multi-host tests will skip"
    exit 0
fi

echo "[setup-multihost-test] installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The packages start no daemons here (no systemd); the tests start their own.
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "[setup-multihost-test] installed ${missing[*]}"
