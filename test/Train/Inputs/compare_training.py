"""compare_training.py ORACLE_DIR METRICS.jsonl PARAMS_DIR [RTOL [PARAM_RTOL]]
                       [--degenerate DIR]:
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
parameter alone the comparison would measure noise, not the update.)
Elements whose gradient is zero in exact arithmetic (the attention key
bias: softmax ignores a shift shared by all keys) are worse: Adam-style
optimizers move them by about lr x the sign of rounding noise each step,
so the runs may differ there by ~lr per step however exact the rest is.
train_oracle.py marks the elements whose gradient never exceeded 1e-6 of
the largest in ORACLE_DIR/degenerate/<name>.npy (or DIR from --degenerate,
for a `run:` oracle); they are left out of the comparison and counted."""
import json
import os
import sys

import numpy as np

argv = sys.argv[1:]
degenerate = None
if "--degenerate" in argv:
    i = argv.index("--degenerate")
    degenerate = argv[i + 1]
    del argv[i:i + 2]
oracle, metrics, params = argv[0:3]
sys.argv = [sys.argv[0]] + argv
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
    if degenerate is None and os.path.isdir(os.path.join(oracle, "degenerate")):
        degenerate = os.path.join(oracle, "degenerate")
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
pworst, pname, ignored = 0.0, None, 0
for f in sorted(os.listdir(oracle_params)):
    b = np.load(os.path.join(oracle_params, f))
    path = os.path.join(params, f)
    assert os.path.exists(path), f"varuna-run did not produce parameter {f}"
    a = np.load(path)
    assert a.shape == b.shape, (f, a.shape, b.shape)
    if not np.issubdtype(b.dtype, np.floating):
        # A constant of another run's dump (a boolean mask, integer ids):
        # never trained, so equal.
        assert a.dtype == b.dtype and np.array_equal(a, b), f"constant {f} differs"
        continue
    assert np.isfinite(a).all(), f"parameter {f} is not finite"
    mask = os.path.join(degenerate, f) if degenerate else None
    if mask and os.path.exists(mask):
        keep = ~np.load(mask)
        ignored += int((~keep).sum())
        a, b = a[keep], b[keep]
        if a.size == 0:
            continue
    rel = float(np.abs(a - b).max() / max(np.abs(b).max(), 1.0))
    if rel > pworst:
        pworst, pname = rel, f
    assert rel <= prtol, f"parameter {f}: max relative difference {rel:.2e}"
print(f"ok: {len(got)} steps, loss max rel {worst:.2e}, params max rel {pworst:.2e} ({pname})"
      + (f", skipped {got_skipped}" if got_skipped else "")
      + (f", {ignored} zero-gradient elements not compared" if ignored else ""))
