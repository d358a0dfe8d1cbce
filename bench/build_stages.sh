#!/usr/bin/env bash
# Benchmark: building the generated stage code (varuna-compile's last step:
# emit C++ for every distinct section body, compile, link JOBDIR/libstages.so)
# for a 4-layer and a 48-layer GPT. Target (issue 4): under 30 s for 48
# layers, and no more than a few seconds slower than for 4 layers -- the
# generated code has one function per *distinct* body, so depth should not
# matter. Width does not change the generated code (only its constants), so
# the models are narrow; GPT2XL=1 also builds the 48-layer GPT-2-XL-shaped
# model of bench/gpt2xl_model.sh (exported once: minutes, ~6.3 GB).
#
#   bash bench/build_stages.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-$BUILD_DIR/bench/build-stages}
mkdir -p "$OUT"
for layers in 4 48; do
  if [[ ! -f "$OUT/gpt$layers.onnx" ]]; then
    PYTHONPATH="$ROOT/python" PYTHONWARNINGS=ignore python3 - "$OUT/gpt$layers.onnx" "$layers" <<'PY'
import sys
import varuna
from varuna import models
model, inputs, names = models.make("gpt", batch=2, layers=int(sys.argv[2]), hidden=64,
                                   heads=4, seq=32, vocab=128)
varuna.export(model, inputs, sys.argv[1], input_names=names)
PY
  fi
done
models=("$OUT/gpt4.onnx" "$OUT/gpt48.onnx")
if [[ "${GPT2XL:-0}" == 1 ]]; then
  source bench/gpt2xl_model.sh
  ensure_gpt2xl "$BUILD_DIR/bench/gpt2xl"
  models+=("$BUILD_DIR/bench/gpt2xl/gpt2xl.onnx")
fi
for m in "${models[@]}"; do
  for i in 1 2; do
    "$BUILD_DIR/bin/varuna-compile" "$m" -o "$OUT/job-$(basename "$m" .onnx)" \
      | sed -n "s|^ *stages: *\(.*\)|$(basename "$m"): \1|p"
  done
done
