#!/usr/bin/env bash
# On a GPU machine with torch, Cython and pytest-benchmark already installed (no network
# needed): build in place, prove the vendor-header build, run the GPU tests and the GPU
# benchmarks.  Logs go to $OUT (or ./.out).  Extra pytest selection: GPU_TESTS.
# GPU_WHEEL=path/to/monarch_cy-*.whl: install that wheel with --no-deps next to the
# machine's torch instead of building, and move the source package aside so that every
# test and benchmark imports the wheel (checked; destructive: for a throwaway copy).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PYTHON:-python3}
rc=0
# Wheels carried for packages the GPU machine lacks (it has no network): .whl/*.whl.
# The GPU machine has no pyzmq (a dependency; without it the mesh-over-GPU test skips):
#   pip download pyzmq --only-binary=:all: --python-version 3.12 --implementation cp \
#       --abi cp312 --platform manylinux_2_28_x86_64 --no-deps -d .whl
if ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/mcy-site .whl/*.whl \
        && export PYTHONPATH=/tmp/mcy-site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
"$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, torch.version.cuda)" | tee -a "$OUT/gpu.txt"
if [ -n "${GPU_WHEEL:-}" ]; then
    echo "== installing $GPU_WHEEL (--no-deps, no build)"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/mcy-wheel "$GPU_WHEEL" \
        || { echo "wheel install FAILED"; exit 1; }
    export PYTHONPATH=/tmp/mcy-wheel${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/mcy-wheel/bin:$PATH
    mv monarch_cy /tmp/mcy-source-aside
    "$PY" -c "import monarch_cy, sys; f = monarch_cy.__file__; print('imported from', f); sys.exit(not f.startswith('/tmp/mcy-wheel/'))" \
        | tee -a "$OUT/gpu.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "the wheel is not what is imported"; exit 1; }
else
    cuda_home=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
    echo "== vendor-verified build against $cuda_home/include"
    MONARCH_CY_GPU_PLATFORM=cuda CUDA_HOME="$cuda_home" "$PY" setup.py build_ext --build-lib /tmp/mcy-vendor-build --build-temp /tmp/mcy-vendor-tmp >"$OUT/build-vendor.log" 2>&1 \
        && echo "vendor build OK" || { echo "vendor build FAILED"; tail -30 "$OUT/build-vendor.log"; rc=1; }
    echo "== default build"
    "$PY" setup.py build_ext --inplace >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
"$PY" -m monarch_cy._cli info | tee "$OUT/info.txt"
echo "== GPU tests"
# GPU tests carry the `gpu` marker and live beside the tests of their module.
"$PY" -m pytest ${GPU_TESTS:--m gpu tests/gpu tests/actor tests/collectives tests/rdma_buffer tests/compat tests/spmd} -v \
    -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" | tail -40
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
"$PY" -m pytest tests/test_package.py -q -p no:cacheprovider 2>&1 | tee -a "$OUT/gpu-tests.log" | tail -3
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
echo "== GPU benchmarks"
MONARCH_CY_BENCH_JSON="$OUT/bench.json" "$PY" -m pytest bench/gpu -q -p no:cacheprovider \
    --benchmark-columns=median,iqr,rounds 2>&1 | tee "$OUT/bench.log" | tail -25
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
exit $rc
