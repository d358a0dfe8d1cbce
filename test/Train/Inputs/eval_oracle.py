"""PyTorch oracle for varuna-run's validation loss (--eval-data).

    eval_oracle.py MODEL KWARGS_JSON WEIGHTS EVAL_DIR BATCH METRICS.jsonl [BATCHES]

Builds the zoo model MODEL (models.make(MODEL, batch=2, **KWARGS)), loads the
trained weights -- WEIGHTS is a --dump-params directory (<name>.npy) or a
--checkpoint-dir (varuna.checkpoint: running statistics included) -- puts it
in evaluation mode (model.eval(): dropout off, batch norms on their running
statistics) and computes the mean loss of the first BATCHES batches (default:
as many whole ones as it holds) of BATCH consecutive examples of
EVAL_DIR/<input>.npy. The last `eval_loss` of METRICS.jsonl (the validation
after the last step, with those weights) must equal it within 1e-5
(relative)."""
import json
import os
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
import varuna.checkpoint as vc  # noqa: E402
from varuna import models  # noqa: E402

name, kwargs, weights, eval_dir, batch, metrics = sys.argv[1:7]
batch = int(batch)
model, _, names = models.make(name, batch=2, **json.loads(kwargs))
if any(f.startswith("step-") for f in os.listdir(weights)):  # a checkpoint
    vc.load_into(model, weights)
else:
    state = model.state_dict()
    for f in os.listdir(weights):
        state[f[:-4]].copy_(torch.from_numpy(np.load(os.path.join(weights, f))))
model.eval()
data = [np.load(os.path.join(eval_dir, n + ".npy")) for n in names]
n = int(sys.argv[7]) if len(sys.argv) > 7 else len(data[0]) // batch
with torch.no_grad():
    losses = [model(*[torch.from_numpy(d[b * batch:(b + 1) * batch]) for d in data]).item()
              for b in range(n)]
want = float(np.mean(losses))
lines = [json.loads(line) for line in open(metrics)]
got = [m["eval_loss"] for m in lines if "eval_loss" in m][-1]
rel = abs(got - want) / abs(want)
assert rel <= 1e-5, (got, want, rel)
print(f"ok: validation loss {got:.6f}, PyTorch model.eval() {want:.6f} over {n} batches "
      f"(rel {rel:.1e})")
