#!/usr/bin/env bash
# Benchmark: varuna-compile (import, costs, cut-points, sections,
# cross-partition analysis, partitions for every P, report and manifest; no
# C++ build) on a 48-layer GPT-2-XL-shaped model (1.56 B parameters).
# Target (issue 3): under 1 s. Prints wall time and peak RSS.
#
#   bash bench/compile_gpt2xl.sh       (first run exports the model: a few
#                                       minutes and ~6.3 GB of disk)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-$BUILD_DIR/bench/gpt2xl}
source bench/gpt2xl_model.sh
ensure_gpt2xl "$OUT"
for i in 1 2 3; do
  /usr/bin/time -f "varuna-compile: %e s wall, %M KiB peak RSS" \
    "$BUILD_DIR/bin/varuna-compile" --no-build "$OUT/gpt2xl.onnx" -o "$OUT/job"
done
python3 -c "import json; m = json.load(open('$OUT/job/manifest.json')); print(len(m['sections']), 'sections,', len(m['partitions']), 'partitions, ties:', m['ties'])"
