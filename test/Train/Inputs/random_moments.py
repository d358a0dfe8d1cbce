"""random_moments.py ORACLE_DIR PARAMS_DIR: the sample mean of each random
term of user_models.py's random_moments, read off the weights varuna-run
trained for one SGD step (w' = w - lr (mean + wd w), w = 1), equals the
distribution's expectation within 6 standard errors of a mean over
batch x MOMENT_DRAWS draws. Prints one line per term and `ok: N terms`."""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from user_models import MOMENT_BLOCKS, MOMENT_DRAWS, MOMENTS  # noqa: E402

oracle, params, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
opt = json.load(open(os.path.join(oracle, "train.json")))["optimizer"]
assert opt["type"] == "sgd", opt
lr, wd = opt["lr"], opt.get("weight_decay", 0.0)
bad = 0
count = 0
for b, names in enumerate(MOMENT_BLOCKS):
    w = np.load(os.path.join(params, f"blocks.{b}.w.npy")).astype(np.float64)
    for i, name in enumerate(names):
        mean = (1.0 - w[i]) / lr - wd
        expect, var = MOMENTS[name]
        tol = 6 * math.sqrt(var / (batch * MOMENT_DRAWS)) + 1e-3
        ok = abs(mean - expect) <= tol
        bad += not ok
        count += 1
        print(f"{name:14s} mean {mean:+.4f} expected {expect:+.4f} tol {tol:.4f}"
              f" {'ok' if ok else 'WRONG'}")
if bad:
    sys.exit(f"{bad} of {count} terms off their expectation")
print(f"ok: {count} terms")
