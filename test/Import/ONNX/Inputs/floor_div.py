"""Floor division of integer ids (torch.div(ids, 9, rounding_mode="floor")),
which torch's ONNX export corrects for the sign with a Xor of booleans --
once "'Xor' on tensors computed at run time is not supported". Exports the
model, trains it 2 SGD steps with varuna-run and with PyTorch on ids that
include negative ones, and prints each step's relative loss difference.

    python3 floor_div.py OUT
"""
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "python"))
from varuna.export import export  # noqa: E402


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(8, 4)
        self.fc = nn.Linear(4, 3)

    def forward(self, ids, y):
        return F.cross_entropy(self.fc(self.e(torch.div(ids, 9, rounding_mode="floor") % 8)
                                       .mean(1)), y)


out = sys.argv[1]
os.makedirs(os.path.join(out, "data"), exist_ok=True)
torch.manual_seed(0)
model = M()
export(model, (torch.randint(0, 64, (4, 5)), torch.randint(0, 3, (4,))),
       os.path.join(out, "m.onnx"))
rng = np.random.default_rng(0)
ids = rng.integers(-64, 64, (8, 5)).astype(np.int64)
y = rng.integers(0, 3, 8).astype(np.int64)
np.save(os.path.join(out, "data", "ids.npy"), ids)
np.save(os.path.join(out, "data", "y.npy"), y)
with open(os.path.join(out, "train.json"), "w") as fh:
    fh.write('{"optimizer": {"type": "sgd", "lr": 0.5}}')
subprocess.run(["varuna-compile", os.path.join(out, "m.onnx"), "-o", os.path.join(out, "job")],
               check=True, stdout=subprocess.DEVNULL)
run = subprocess.run(["varuna-run", os.path.join(out, "job"), "--batch", "4", "--micro-batch",
                      "2", "--steps", "2", "--data", os.path.join(out, "data"), "--config",
                      os.path.join(out, "train.json")], check=True, capture_output=True, text=True)
losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", run.stdout)]
opt = torch.optim.SGD(model.parameters(), lr=0.5)
for s in range(2):
    opt.zero_grad()
    loss = model(torch.from_numpy(ids[4 * s:4 * s + 4]), torch.from_numpy(y[4 * s:4 * s + 4]))
    loss.backward()
    opt.step()
    print(f"step {s} close {abs(loss.item() - losses[s]) < 1e-5 * loss.item()}")
