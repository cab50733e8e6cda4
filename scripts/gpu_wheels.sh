#!/usr/bin/env bash
# Download the small wheels listed in scripts/gpu_wheels.txt for the GPU machine (Python 3.12, manylinux x86_64) into
# DIR (default .gpu-wheels, git-ignored), with no dependencies, and refuse a total over 60 MiB.
# Run it on a machine that reaches PyPI; then carry DIR to the GPU machine beside the checkout, where
# `bash scripts/gpu_check.sh OUT` unpacks it (no index, no pip needed) into OUT/site and prepends it to PYTHONPATH.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/.gpu-wheels}
LIMIT=$((60 * 1024 * 1024))
mkdir -p "$DIR"
mapfile -t reqs < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$ROOT/scripts/gpu_wheels.txt" | grep -v '^$')
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$DIR" "${reqs[@]}"
total=$(du -cb "$DIR"/*.whl | tail -n 1 | cut -f1)
echo "wheels in $DIR: $(ls "$DIR" | wc -l), $((total / 1024)) KiB"
if [ "$total" -gt "$LIMIT" ]; then
  echo "!! $total bytes is over the 60 MiB limit for what travels to the GPU machine" >&2
  exit 1
fi
(cd "$DIR" && sha256sum ./*.whl > SHA256SUMS)
