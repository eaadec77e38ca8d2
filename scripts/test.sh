#!/usr/bin/env bash
# The whole test suite: set up (venv, install, test-only system packages), then pytest.
# Extra arguments go to pytest.  GPU tests skip with their reason where no GPU exists.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
scripts/setup-rdma-test.sh
scripts/setup-multihost-test.sh
scripts/setup-rccl-test.sh
exec .venv/bin/python -m pytest "$@"
