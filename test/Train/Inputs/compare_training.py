"""compare_training.py ORACLE_DIR METRICS.jsonl PARAMS_DIR [RTOL [PARAM_RTOL]]:
per-step losses and final parameters of varuna-run equal the PyTorch
oracle's (parameters within PARAM_RTOL, default RTOL), and so do the steps
skipped for a loss-scale overflow when either side records them.
ORACLE_DIR may also be `run:REF_METRICS.jsonl:REF_PARAMS_DIR`, another
varuna-run (for LAMB, which torch.optim lacks: the single-process run, whose
LAMB is checked against an independent implementation in test/Runtime).

Losses: relative error <= RTOL. Parameters: max |a - b| <= RTOL * max(max |b|,
1). (Adam-style updates divide the gradient by its running RMS, so a
parameter whose exact gradient is zero -- an attention key bias -- moves by
about lr * sign(rounding noise) in both runs; relative to such a tiny
parameter alone the comparison would measure noise, not the update.)"""
import json
import os
import sys

import numpy as np

oracle, metrics, params = sys.argv[1:4]
rtol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-5
prtol = float(sys.argv[5]) if len(sys.argv) > 5 else rtol
if oracle.startswith("run:"):
    _, ref_metrics, ref_params = oracle.split(":")
    lines = [json.loads(line) for line in open(ref_metrics)]
    want = [m["loss"] for m in lines]
    want_skipped = [m["step"] for m in lines if m.get("skipped")]
    oracle_params = ref_params
else:
    expected = json.load(open(os.path.join(oracle, "expected.json")))
    want = expected["losses"]
    want_skipped = expected.get("skipped", [])
    oracle_params = os.path.join(oracle, "params")
lines = [json.loads(line) for line in open(metrics)]
got = [m["loss"] for m in lines]
got_skipped = [m["step"] for m in lines if m.get("skipped")]
assert got_skipped == want_skipped, f"skipped steps {got_skipped}, expected {want_skipped}"
assert len(got) == len(want), (len(got), len(want))
worst = 0.0
for s, (a, b) in enumerate(zip(got, want)):
    rel = abs(a - b) / max(abs(b), 1e-12)
    worst = max(worst, rel)
    assert rel <= rtol, f"step {s}: varuna {a!r} vs PyTorch {b!r} (rel {rel:.2e})"
pworst, pname = 0.0, None
for f in sorted(os.listdir(oracle_params)):
    b = np.load(os.path.join(oracle_params, f))
    path = os.path.join(params, f)
    assert os.path.exists(path), f"varuna-run did not produce parameter {f}"
    a = np.load(path)
    assert a.shape == b.shape, (f, a.shape, b.shape)
    rel = float(np.abs(a - b).max() / max(np.abs(b).max(), 1.0))
    if rel > pworst:
        pworst, pname = rel, f
    assert rel <= prtol, f"parameter {f}: max relative difference {rel:.2e}"
print(f"ok: {len(got)} steps, loss max rel {worst:.2e}, params max rel {pworst:.2e} ({pname})"
      + (f", skipped {got_skipped}" if got_skipped else ""))
