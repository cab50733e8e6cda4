#!/usr/bin/env bash
# One prepared GPU check for a machine with no package index and no nox (Python 3.12, torch 2.11, triton 3.6).
# Usage: scripts/gpu_check.sh OUT_DIR
# Runs every package's `gpu`/`triton` tests natively (TRITON_INTERPRET=0) and its benchmarks, with PYTHONPATH on
# packages/*/src (no install), and writes logs and the benchmarks' JSON results into OUT_DIR. Sized for < 8 minutes:
# each package's tests get TEST_BUDGET seconds and each benchmark BENCH_BUDGET seconds.
set -uo pipefail
OUT=${1:?usage: scripts/gpu_check.sh OUT_DIR}
TEST_BUDGET=${TEST_BUDGET:-40}
BENCH_BUDGET=${BENCH_BUDGET:-20}
TOTAL_BUDGET=${TOTAL_BUDGET:-450}   # seconds; whatever is left when it runs out is skipped and reported
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
mkdir -p "$OUT/logs" "$OUT/bench"
PYTHONPATH=$(ls -d "$ROOT"/packages/*/src | paste -sd: -)
export PYTHONPATH TRITON_INTERPRET=0 PYTHONDONTWRITEBYTECODE=1
python - <<'PY' > "$OUT/env.txt" 2>&1
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.cuda.is_available())
print("device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
try:
    import triton; print("triton", triton.__version__)
except Exception as e:
    print("triton missing:", e)
PY
cat "$OUT/env.txt"
status=0
for pkgdir in packages/*/; do
  pkg=$(basename "$pkgdir")
  [ -d "$pkgdir/tests" ] || continue
  if [ "$SECONDS" -ge "$TOTAL_BUDGET" ]; then echo "!! skipped $pkg: total budget spent"; status=1; continue; fi
  echo "== $pkg: gpu/triton tests"
  timeout "$TEST_BUDGET" python -m pytest "$pkgdir/tests" -m "gpu or triton" -q -p no:cacheprovider \
    --junitxml="$OUT/logs/$pkg-junit.xml" > "$OUT/logs/$pkg-tests.log" 2>&1
  rc=$?
  tail -n 3 "$OUT/logs/$pkg-tests.log"
  # 0 passed, 5 no gpu/triton tests; anything else (124 = out of time) is recorded as a failure
  if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then echo "!! $pkg tests rc=$rc"; status=1; fi
  for bench in "$pkgdir"/benchmarks/bench_*.py; do
    [ -f "$bench" ] || continue
    echo "== $pkg: $(basename "$bench")"
    name=$(basename "$bench" .py)
    if [ "$SECONDS" -ge "$TOTAL_BUDGET" ]; then echo "!! skipped $bench: total budget spent"; continue; fi
    device_arg=()
    grep -q '"--device"' "$bench" && device_arg=(--device cuda)
    timeout "$BENCH_BUDGET" python "$bench" "${device_arg[@]}" --out "$OUT/bench/$pkg-$name.json" \
      > "$OUT/logs/$pkg-$name.log" 2>&1 || echo "!! $bench rc=$?"
  done
done
echo "gpu_check finished with status $status; results in $OUT"
exit $status
