"""checkpoint-load.test: a varuna-run checkpoint taken after step K, its
weights (load_into) and AdamW state (load_optimizer_into) loaded into the
zoo model and torch.optim.AdamW, trained on in plain PyTorch from step K:
the losses and final parameters are the oracle's (train_oracle.py, PyTorch
from the start). Without the optimizer state the parameters differ.

    continue_in_torch.py ORACLE_DIR CKPT_STEP_DIR STEPS"""
import json
import os
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
import varuna.checkpoint as vc  # noqa: E402
from varuna import models  # noqa: E402

oracle, ckpt, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = json.load(open(os.path.join(oracle, "train.json")))["optimizer"]
expected = json.load(open(os.path.join(oracle, "expected.json")))["losses"]
first = json.load(open(os.path.join(ckpt, "manifest.json")))["step"]


def run(with_state):
    torch.manual_seed(0)
    model, example, names = models.make("gpt")
    model.train()
    vc.load_into(model, ckpt)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=0.01)
    loaded = vc.load_optimizer_into(opt, model, ckpt) if with_state else 0
    data = {n: np.load(os.path.join(oracle, "data", n + ".npy")) for n in names}
    samples = len(data[names[0]])
    losses = []
    for step in range(first, steps):
        idx = [(step * 8 + j) % samples for j in range(8)]
        opt.zero_grad()
        loss = model(*[torch.from_numpy(data[n][idx]) for n in names])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # compare_training.py's rule: max |a - b| / max(max |b|, 1), without the
    # elements whose exact gradient is zero (AdamW moves them by noise).
    worst = 0.0
    for n, p in model.named_parameters():
        ref = np.load(os.path.join(oracle, "params", n + ".npy"))
        diff = np.abs(p.detach().numpy() - ref)
        mask = os.path.join(oracle, "degenerate", n + ".npy")
        if os.path.exists(mask):
            diff = diff[~np.load(mask)]
        if diff.size:
            worst = max(worst, float(diff.max()) / max(float(np.abs(ref).max()), 1.0))
    return loaded, losses, worst


loaded, losses, worst = run(True)
loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, expected[first:]))
print(f"from step {first}: {loaded} parameters' AdamW state loaded; losses within "
      f"{'1e-5' if loss_err < 1e-5 else loss_err}, parameters within "
      f"{'1e-5' if worst < 1e-5 else worst} of the oracle")
print("without the state, parameters off by more than 1e-5:", run(False)[2] > 1e-5)
try:
    vc.load_optimizer_into(torch.optim.SGD(models.make("gpt")[0].parameters(), lr=0.1),
                           models.make("gpt")[0], ckpt)
except ValueError as e:
    print("sgd:", e)
