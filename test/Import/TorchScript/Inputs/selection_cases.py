"""selection_cases.py OUTDIR: values selected by a boolean mask (x[mask],
masked_select; lib/Import/TorchScript/TorchScriptSelection.cpp). Each case
is a model of (x [B, S, D], labels [B, S], mask [B, S]) whose loss reads a
selection, exported with varuna.export, imported by varuna-translate and
evaluated by varuna-eval (tools from PATH); the oracle is PyTorch's loss.
Prints one line per case and "N cases, N equal"; then, for each model
that must be refused, varuna-translate's error."""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

import varuna
from evaluate import evaluate

W = torch.linspace(0.5, 1.5, 5)
CASES = {
    # mask over every dimension: a 1-D selection
    "all_dims": lambda x, y, m: (x[x > 0.3] ** 2).sum() + x.masked_select(x < 0).mean()
    + x.masked_select((m > 0)[..., None]).sum()  # a mask broadcast to x
    + x[m.to(torch.uint8)].sum()  # torch's older uint8 mask
    + x[torch.where(m > 0)].pow(2).mean() + x[(m > 0).nonzero(as_tuple=True)].sum(),
    # a flattened mask over [B*S] rows; sums keeping the dimensions
    "flat_rows": lambda x, y, m: x.reshape(-1, 5)[m.reshape(-1) > 0].sum(0, keepdim=True).pow(2).sum()
    + x[m > 0].sum(dim=(0, 1), keepdim=True).sum(),
    # trailing reductions stay row-wise; amax / argmax / norm within rows
    "row_reductions": lambda x, y, m: x[m > 0].amax(-1).mean() + x[m > 0].argmax(1).float().mean()
    + torch.linalg.vector_norm(x[m > 0], dim=-1).mean() + x[m > 0].prod(1).sum()
    + x[m > 0].amax(0).sum() + x[m > 0].amin(dim=(0, 1), keepdim=True).sum(),
    # cross-entropy with reduction sum and none, nll_loss, probability targets
    "class_losses": lambda x, y, m: F.cross_entropy(x[m > 0], y[m > 0], reduction="sum") / 10
    + (F.cross_entropy(x[m > 0], y[m > 0], reduction="none") * x[m > 0, 0]).sum() / 10
    + F.nll_loss(torch.log_softmax(x, -1)[m > 0], y[m > 0], weight=W, ignore_index=2)
    + F.cross_entropy(x[m > 0], torch.softmax(x * 2, -1)[m > 0]),
    # elementwise losses with sum and mean, BCE with a per-class weight
    "elementwise_losses": lambda x, y, m: F.l1_loss(x[m > 0], torch.tanh(x)[m > 0], reduction="sum") / 20
    + F.mse_loss(x[m > 0], torch.zeros(5)) + F.huber_loss(x[m > 0], x[m > 0] * 0.5, delta=0.5)
    + F.binary_cross_entropy_with_logits(x[m > 0], (x > 0).float()[m > 0], pos_weight=W),
    # writes: index_put with accumulate, masked_scatter of a selection
    "writes": lambda x, y, m: (torch.index_put(x, (m > 0,), x[m > 0] * 3, accumulate=True) ** 2).sum()
    + (x.masked_scatter((m > 0)[..., None].expand_as(x), torch.sin(x[m > 0])) ** 2).mean(),
    # a parameter-like tensor broadcast along the rows; where; masked_fill
    "broadcasts": lambda x, y, m: (torch.where(x[m > 0] > 0, x[m > 0] * W, W[None]) ** 2).mean()
    + x[m > 0].masked_fill(x[m > 0] < -0.5, 1.0).mean() + (x[m > 0] + W[None, :]).clamp(0, 1).mean(),
}

REFUSED = {
    # the number of selected rows is data
    "size": lambda x, y, m: x[m > 0].sum() / x[m > 0].shape[0],
    # two masks
    "two_masks": lambda x, y, m: (x[m > 0].sum(-1) * x[m.roll(1, 1) > 0].sum(-1)).sum(),
    # concatenation of selections
    "concat": lambda x, y, m: torch.cat([x[m > 0], x[m > 0]]).sum(),
    # dropout that drops (dropout with p = 0 passes it on)
    "dropout": lambda x, y, m: F.dropout(x[m > 0], 0.1).sum() + F.dropout(x[m > 0], 0.0).sum(),
    # part of torch.where(mask)'s indices
    "where_part": lambda x, y, m: x[torch.where(m > 0)[0]].sum(),
    # a product over the rows
    "prod_rows": lambda x, y, m: x[m > 0].prod(0).sum(),
    # a tensor with as many rows as this batch's selection
    "rows_mismatch": lambda x, y, m: (x[m > 0] * ROWS).sum(),
    # a mask over later dimensions
    "later_dims": lambda x, y, m: x[:, torch.tensor([1, 0, 1, 1, 0, 1]) > 0].sum(),
}


class Case(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, 5))

    def forward(self, x, labels, mask):
        return self.f(x * self.w, labels, mask)


out = sys.argv[1]
torch.manual_seed(0)
x = torch.randn(4, 6, 5)
labels = torch.randint(0, 5, (4, 6))
mask = (torch.rand(4, 6) > 0.4).long()
names = ["x", "labels", "mask"]
ROWS = torch.ones(int(mask.sum()), 5)


def export(name, f):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    model = Case(f)
    varuna.export(model, (x, labels, mask), os.path.join(d, "m.pt"), input_names=names)
    for n, t in zip(names, (x, labels, mask)):
        np.save(os.path.join(d, "in", n + ".npy"), t.numpy())
    return d, model


equal = 0
for name, f in CASES.items():
    d, model = export(name, f)
    want = model(x, labels, mask).item()
    got = evaluate(d)
    ok = abs(got - want) <= 1e-5 * max(1.0, abs(want))
    equal += ok
    print(f"{name}: {'equal' if ok else 'DIFFERENT'} (varuna {got!r}, torch {want!r})")
print(f"{len(CASES)} cases, {equal} equal")
for name, f in REFUSED.items():
    d, _ = export(name, f)
    run = subprocess.run(["varuna-translate", "--import-torchscript", os.path.join(d, "m.pt")],
                         capture_output=True, text=True)
    error = next((l for l in run.stderr.splitlines() if "error:" in l), "no error")
    print(f"refused {name} ({run.returncode}): {error}")
# torch's ONNX exporter writes x[mask] as NonZero + GatherND: refused by the
# ONNX importer with the way out.
onnx = os.path.join(out, "onnx.onnx")
varuna.export(Case(CASES["class_losses"]), (x, labels, mask), onnx, input_names=names)
run = subprocess.run(["varuna-translate", "--import-onnx", onnx], capture_output=True, text=True)
print("onnx:", next((l for l in run.stderr.splitlines() if "error:" in l), "no error"))
