#!/usr/bin/env bash
# The main job on this machine: set up, then train a char-GPT data-parallel over a mesh
# (4 CPU procs here, one proc per GPU where GPUs exist), killing one worker a third of
# the way in and recovering from it.  Extra arguments go to `monarch-cy train`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/monarch-cy train --inject-fault auto --out train_out "$@"
