#!/usr/bin/env bash
# Monarch's own Python tests, run unchanged on torchmonarch 0.7.0 and on monarch_cy
# (through monarch_cy.compat), side by side.  Not part of CI: it needs a Monarch checkout.
#   scripts/monarch-tests.sh --monarch PATH [--rev REV] [FILE ...]   (--help for the rest)
# Makes both venvs first (scripts/setup.sh --test, scripts/setup-monarch-reference.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
for a in "$@"; do [ "$a" = -h ] || [ "$a" = --help ] && exec python3 scripts/monarch_tests.py --help; done
scripts/setup.sh --test >&2
scripts/setup-monarch-reference.sh >&2
exec .venv/bin/python scripts/monarch_tests.py "$@"
