#!/usr/bin/env bash
# Prepared GPU check for iclr25-teal (no install step; run from the repo root on a CUDA machine):
#   bash packages/teal/benchmarks/gpu_check.sh
# 1) kernel tests natively on CUDA (Triton, not the interpreter), 2) GEMV micro-benchmark (quick sweep),
# 3) end-to-end decode, eager and torch.compile + static cache. Results go to ${OUT:-packages/teal/benchmarks/results}.
# Budget: about 5 minutes on an H100/H200 (the 7B-shaped model is random-init in fp16, ~13.5 GB).
set -u
cd "$(dirname "$0")/../../.."
export PYTHONPATH="packages/shared/src:packages/teal/src${PYTHONPATH:+:$PYTHONPATH}"
RES="${OUT:-packages/teal/benchmarks/results}"
mkdir -p "$RES"
PY="${PYTHON:-python}"
status=0
timeout 150 "$PY" -m pytest packages/teal/tests/test_teal_kernels.py packages/teal/tests/test_teal_sparsify.py \
  -m "not slow" -q -p no:cacheprovider -o addopts="-p iclr25.shared.testing.plugin --import-mode=importlib" \
  2>&1 | tail -n 15 | tee "$RES/gpu_tests.txt" || status=1
timeout 120 "$PY" packages/teal/benchmarks/bench_teal_gemv.py --device cuda --quick --out "$RES/gemv_gpu.json" || status=1
timeout 240 "$PY" packages/teal/benchmarks/bench_teal_decode.py --device cuda --new-tokens 64 --repeats 3 \
  --out "$RES/decode_gpu.json" || status=1
exit $status
