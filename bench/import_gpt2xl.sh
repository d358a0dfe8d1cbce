#!/usr/bin/env bash
# Benchmark: import a 48-layer GPT-2-XL-shaped model (hidden 1600, 1.56 B
# parameters, weights in an external data file) with varuna-translate.
# Target (issue 2): under 2 s and under 1 GB of memory, because weights are
# referenced, not copied. Prints wall time and peak RSS of the import.
#
#   bash bench/import_gpt2xl.sh        (first run exports the model: a few
#                                       minutes and ~6.3 GB of disk)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-$BUILD_DIR/bench/gpt2xl}
source bench/gpt2xl_model.sh
ensure_gpt2xl "$OUT"
for i in 1 2 3; do
  /usr/bin/time -f "import: %e s wall, %M KiB peak RSS" \
    "$BUILD_DIR/bin/varuna-translate" --import-onnx "$OUT/gpt2xl.onnx" -o "$OUT/gpt2xl.mlir"
done
grep -c "varuna.param" "$OUT/gpt2xl.mlir" | sed 's/^/parameters imported: /'
