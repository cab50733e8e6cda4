#!/usr/bin/env bash
# One prepared GPU check for a machine with no package index and no nox (Python 3.12, torch 2.11, triton 3.6).
#   bash scripts/gpu_check.sh OUT_DIR                 # gpu/triton tests + benchmarks, OUT_DIR/summary.json
#   bash scripts/gpu_check.sh --dry-run OUT_DIR       # anywhere: environment, plan, budgets, missing modules
# Runs every package's "gpu or triton" tests natively (TRITON_INTERPRET=0) and its benchmarks with PYTHONPATH on
# packages/*/src (no install), each under a time budget, within a total budget sized for < 8 minutes of machine time.
# The driver is scripts/gpu_check.py (standard library only); `--help` lists its options.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
exec "$PYTHON" "$ROOT/scripts/gpu_check.py" "$@"
