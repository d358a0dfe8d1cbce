# Sourced by the GPT-2-XL benchmarks: exports the 48-layer GPT-2-XL-shaped
# model (hidden 1600, 1.56 B parameters, weights in one external data file)
# once into $OUT (a few minutes and ~6.3 GB of disk), then reuses it.
ensure_gpt2xl() {
  local out=$1
  mkdir -p "$out"
  if [[ ! -f "$out/gpt2xl.onnx" || ! -f "$out/gpt2xl.onnx.data" ]]; then
    echo "exporting the GPT-2-XL-shaped model to $out (once) ..."
    PYTHONPATH="$ROOT/python" PYTHONWARNINGS=ignore python3 - "$out/gpt2xl.onnx" <<'PY'
import sys, time
import varuna
from varuna import models
t = time.time()
model, inputs, names = models.make_gpt2_xl_shape(batch=1)
varuna.export(model, inputs, sys.argv[1], input_names=names, external_data=True)
print(f"exported in {time.time() - t:.0f} s")
PY
  fi
  ls -l "$out"/gpt2xl.onnx*
}
