#!/usr/bin/env bash
# The main job on the bundled default: export a small GPT-style model with tied
# input/output embeddings from PyTorch, import it into the varuna dialect,
# print a readable summary of the training graph, compile it into a job
# directory (cut-points, sections, ties, balanced stages for every P), print
# the compile report, and train it for 30 steps in a 2 x 2 pipeline (2 stages,
# 2 data-parallel replicas: 4 ranks on loopback, Gloo), printing the loss
# curve and writing the timeline (Chrome trace + SVG).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-$BUILD_DIR/demo}

bash scripts/setup.sh
bash scripts/build.sh >/dev/null
mkdir -p "$OUT"

echo "== export: python -m varuna.testmodels (GPT-style, tied embeddings) -> $OUT/gpt.onnx"
PYTHONPATH="$ROOT/python" PYTHONWARNINGS=ignore python3 -m varuna.testmodels "$OUT" --only gpt >/dev/null
echo "== import: varuna-translate --import-onnx $OUT/gpt.onnx -o $OUT/gpt.mlir"
"$BUILD_DIR/bin/varuna-translate" --import-onnx "$OUT/gpt.onnx" -o "$OUT/gpt.mlir"
echo "== summary: varuna-opt --varuna-print-graph-summary"
"$BUILD_DIR/bin/varuna-opt" "$OUT/gpt.mlir" --varuna-print-graph-summary -o /dev/null
echo
echo "== compile: varuna-compile $OUT/gpt.onnx -o $OUT/job"
"$BUILD_DIR/bin/varuna-compile" "$OUT/gpt.onnx" -o "$OUT/job"
echo
cat "$OUT/job/report.md"
echo
echo "== train: varuna-run $OUT/job --stages 2 --replicas 2 --batch 16 --micro-batch 2 --steps 30 --synthetic --synthetic-samples 32 --trace $OUT/timeline.json"
"$BUILD_DIR/bin/varuna-run" "$OUT/job" --stages 2 --replicas 2 --batch 16 --micro-batch 2 \
  --steps 30 --synthetic --synthetic-samples 32 --config scripts/demo-train.json \
  --metrics "$OUT/metrics.jsonl" --trace "$OUT/timeline.json"
PYTHONPATH="$ROOT/python" python3 -m varuna.trace "$OUT/timeline.json" -o "$OUT/timeline.svg"
PYTHONPATH="$ROOT/python" python3 -m varuna.trace "$OUT/timeline.json" -o "$OUT/timeline.png"
echo "== timeline: $OUT/timeline.json (open in https://ui.perfetto.dev), $OUT/timeline.svg, $OUT/timeline.png"
