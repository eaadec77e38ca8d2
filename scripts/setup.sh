#!/usr/bin/env bash
# Set up the project's virtual environment and install monarch_cy into it (editable).
#   scripts/setup.sh          runtime dependencies
#   scripts/setup.sh --test   plus what the test suite needs (pytest, CUDA headers wheels,
#                             and, as root with apt, Debian's HIP headers and runtime)
# Idempotent: a second run only checks.  VENV (default .venv) and PYTHON (default python3)
# may be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
want_test=0
[ "${1:-}" = "--test" ] && want_test=1

if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup] creating $VENV with $($PYTHON --version 2>&1)"
    "$PYTHON" -m venv "$VENV"
fi
py="$VENV/bin/python"
pip() { "$py" -m pip --disable-pip-version-check -q "$@"; }

has_gpu() { [ -e /dev/nvidiactl ] || [ -e /dev/kfd ]; }

if ! "$py" -c "import torch" 2>/dev/null; then
    if has_gpu; then
        echo "[setup] GPU found: installing torch for it"
        pip install torch
    else
        # No GPU: the CPU build, which installs fast here; a plain "torch" would pull a multi-GB
        # CUDA build.  TORCH_SPEC overrides (with PIP_INDEX_URL/PIP_EXTRA_INDEX_URL for CPU wheels).
        echo "[setup] no GPU: installing torch 2.13.0 (CPU build)"
        pip install "${TORCH_SPEC:-torch==2.13.0}"
    fi
fi

extras=""
if [ "$want_test" = 1 ]; then
    extras="[test]"
fi
stamp="$VENV/.monarch_cy-installed$extras"
if [ ! -f "$stamp" ] || [ -n "$(find monarch_cy setup.py pyproject.toml -newer "$stamp" -print -quit)" ]; then
    echo "[setup] installing monarch_cy$extras (builds the Cython extensions)"
    pip install -e ".$extras"
    # An editable install compiles no bytecode (a regular one does); without it every
    # process, each worker included, recompiles the package when
    # PYTHONDONTWRITEBYTECODE is set.
    "$py" -m compileall -q monarch_cy >/dev/null
    touch "$stamp"
fi

if [ "$want_test" = 1 ]; then
    # Real CUDA 13 headers for the vendor-header proof (8 MB of wheels; no toolkit needed).
    if ! "$py" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('nvidia') is None)" 2>/dev/null \
        || ! ls "$VENV"/lib/python*/site-packages/nvidia/cu13/include/crt/host_defines.h >/dev/null 2>&1; then
        echo "[setup] installing CUDA 13 runtime headers (nvidia-cuda-runtime, nvidia-cuda-crt wheels)"
        pip install "nvidia-cuda-runtime==13.0.96" "nvidia-cuda-crt==13.0.88" \
            || echo "[setup] WARNING: CUDA header wheels not installed; the CUDA header tests will skip"
    fi
    # Real HIP headers and runtime from Debian, for the HIP header proof and no-device tests.
    if [ ! -f /usr/include/hip/hip_runtime_api.h ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "[setup] installing Debian's libamdhip64-dev (HIP headers and runtime)"
            (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libamdhip64-dev) >/dev/null \
                || echo "[setup] WARNING: libamdhip64-dev not installed; the HIP tests will skip"
        else
            echo "[setup] not root or no apt: HIP header tests will skip (apt-get install libamdhip64-dev)"
        fi
    fi
fi
