#!/usr/bin/env bash
# GPU check of iclr25-teal (no install step; any folder; run on a CUDA machine):
#   bash packages/teal/benchmarks/gpu_check.sh OUT          # = bash scripts/gpu_check.sh --only teal OUT: the
#                                                           #   "gpu or triton" tests natively and every benchmark
#                                                           #   with its GPU_ARGS (--quick), OUT/summary.json
#   bash packages/teal/benchmarks/gpu_check.sh OUT --full   # then the full sweeps too (~6 min more on an H100/H200):
#                                                           #   all GEMV shapes, 32-layer Llama-2-7B-shaped fp16 decode
#                                                           #   eager + static cache/torch.compile, all forward inputs
# Full-sweep JSON goes to OUT/full/{gemv,decode,forward}_gpu.json.
set -u
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: bash packages/teal/benchmarks/gpu_check.sh OUT [--full]" >&2
  exit 2
fi
OUT=$1
FULL=${2:-}
if [ -n "$FULL" ] && [ "$FULL" != "--full" ]; then
  echo "unknown option $FULL (expected --full)" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PY="${PYTHON:-python3}"
status=0
bash "$ROOT/scripts/gpu_check.sh" --only teal "$OUT" || status=1
if [ "$FULL" = "--full" ]; then
  cd "$ROOT" || exit 1
  export PYTHONPATH="packages/shared/src:packages/teal/src${PYTHONPATH:+:$PYTHONPATH}"
  mkdir -p "$OUT/full"
  timeout 120 "$PY" packages/teal/benchmarks/bench_teal_gemv.py --device cuda --out "$OUT/full/gemv_gpu.json" || status=1
  timeout 300 "$PY" packages/teal/benchmarks/bench_teal_decode.py --device cuda --new-tokens 64 --repeats 5 \
    --out "$OUT/full/decode_gpu.json" || status=1
  timeout 90 "$PY" packages/teal/benchmarks/bench_teal_forward.py --device cuda --out "$OUT/full/forward_gpu.json" \
    || status=1
fi
exit $status
