#!/usr/bin/env bash
# The main job on this machine: set up, then run it.  Until the training job lands,
# the main job is the platform report: `monarch-cy info`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/monarch-cy info "$@"
