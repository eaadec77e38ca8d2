#!/usr/bin/env bash
# The reference venv for the differential tests (tests/compat/differential/): torchmonarch
# 0.7.0, the real Monarch, next to torch's CPU build (as scripts/setup.sh pins it, so the
# multi-GB CUDA build is never pulled; TORCH_SPEC overrides).
#   REF_VENV (default .venv-monarch-ref) and PYTHON (default python3) may be set.
# Idempotent: a stamp in the venv makes later runs return at once.  Where the install
# fails, the reason goes to $REF_VENV.failed and this exits 0: the differential tests
# then skip with that reason.  No stdin is read.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
REF_VENV=${REF_VENV:-.venv-monarch-ref}
stamp="$REF_VENV/.monarch-reference-installed"
failed="$REF_VENV.failed"
[ -f "$stamp" ] && exit 0

echo "[setup-monarch-reference] creating $REF_VENV with torchmonarch 0.7.0 and ${TORCH_SPEC:-torch==2.13.0} (CPU)"
log=$(mktemp)
if { [ -x "$REF_VENV/bin/python" ] || "$PYTHON" -m venv "$REF_VENV"; } >"$log" 2>&1 \
    && "$REF_VENV/bin/python" -m pip --disable-pip-version-check -q install \
        "${TORCH_SPEC:-torch==2.13.0}" "torchmonarch==0.7.0" </dev/null >>"$log" 2>&1 \
    && "$REF_VENV/bin/python" -c "import monarch.actor" </dev/null >>"$log" 2>&1; then
    rm -f "$failed"
    touch "$stamp"
else
    { echo "installing torchmonarch 0.7.0 into $REF_VENV failed:"; tail -5 "$log"; } >"$failed"
    echo "[setup-monarch-reference] WARNING: not installed; the differential tests will skip:"
    sed 's/^/    /' "$failed"
fi
rm -f "$log"
exit 0
