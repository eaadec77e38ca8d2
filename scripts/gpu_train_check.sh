#!/usr/bin/env bash
# On a GPU machine (after scripts/gpu_check.sh built the extensions): the training job on
# the GPUs and its benchmark against torchrun + DDP.  Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
[ -d /tmp/mcy-site ] && export PYTHONPATH=$PYTHONPATH:/tmp/mcy-site
PY=${PYTHON:-python3}
rc=0
echo "== monarch-cy train on the GPUs ${TRAIN_ARGS:-}"
"$PY" -m monarch_cy._cli train --steps "${TRAIN_STEPS:-200}" --progress lines --out "$OUT/train" ${TRAIN_ARGS:-} 2>&1 | tee "$OUT/train.log" | tail -15
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
echo "== bench: train vs torchrun DDP"
"$PY" -m pytest bench/bench_train.py -q -s -p no:cacheprovider 2>&1 | tee "$OUT/bench-train.log" | grep -E "steps/s|passed|failed|Error"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
exit $rc
