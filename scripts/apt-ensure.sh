#!/usr/bin/env bash
# apt-ensure.sh TAG WHAT-SKIPS PKG...: install, as root with apt, the Debian packages a test
# folder needs.  Idempotent and quick: when all are present it only checks (no apt-get
# update).  Not root or no apt: prints what is missing and exits 0, so the tests that need
# them skip with their reason.  Exit status is non-zero only when apt itself fails.
set -euo pipefail
tag=$1 what=$2
shift 2
missing=()
for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ "${#missing[@]}" = 0 ]; then
    echo "[$tag] all present: $*"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "[$tag] not root or no apt-get: missing ${missing[*]}; $what will skip"
    exit 0
fi
echo "[$tag] installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Try without refreshing the package lists first (fast); refresh only when that fails.
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "[$tag] done"
