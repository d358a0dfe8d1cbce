"""The forward pass of an imported model equals onnxruntime's.

    python3 ort_check.py MODEL.onnx INPUTS_DIR EVAL_OUTPUT [--rtol 1e-5]

Runs MODEL.onnx with onnxruntime (CPU) on INPUTS_DIR/<input>.npy and compares
every scalar output with the `<name> = <value>` line varuna-eval printed for
it (EVAL_OUTPUT). Exits 1, printing both numbers, on a relative difference
above rtol or a missing line."""
import argparse
import os
import sys

import numpy as np
import onnxruntime as ort

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("inputs")
ap.add_argument("output")
ap.add_argument("--rtol", type=float, default=1e-5)
args = ap.parse_args()

options = ort.SessionOptions()
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
feeds = {i.name: np.load(os.path.join(args.inputs, i.name + ".npy")) for i in session.get_inputs()}
outputs = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))

got = {}
for line in open(args.output):
    key, sep, value = line.partition(" = ")
    if sep:
        got[key.strip()] = value.split()[0]

status = 0
checked = 0
for name, want in outputs.items():
    want = np.asarray(want)
    if want.ndim != 0:
        continue
    if name not in got:
        print(f"FAIL: varuna-eval printed no '{name} = ...' ({args.output})", file=sys.stderr)
        status = 1
        continue
    g, w = float(got[name]), float(want)
    rel = abs(g - w) / max(abs(w), 1e-30)
    ok = rel <= args.rtol
    checked += 1
    print(f"{'OK' if ok else 'FAIL'}: {os.path.basename(args.model)} {name}: varuna {g!r}, "
          f"onnxruntime {w!r} (relative error {rel:.3g}, tolerance {args.rtol:g})")
    status |= 0 if ok else 1
if checked == 0:
    print("FAIL: the model has no scalar output to compare", file=sys.stderr)
    status = 1
sys.exit(status)
