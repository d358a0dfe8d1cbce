"""loss_oracle.py OUTDIR --loss sum|mean|sum-scaled|ratio|masked|two-means|mixed
                 [--steps S] [--batch M]:
a small transformer-style language model (tied embedding, 4 blocks) whose
loss reduces over the examples in the given way -- cross_entropy with
reduction sum, mean, sum / 100 (a sum scaled after the reduction), or sum /
the number of labels counted (a mean by hand: a ratio of two sums; masked:
per-token losses times a mask, summed, over the mask's sum) --
exported to OUTDIR/model.onnx, with OUTDIR/data, OUTDIR/train.json (SGD),
and plain PyTorch's training of it on the whole batch: OUTDIR/expected.json
(loss per step) and OUTDIR/params (final parameters), what
compare_training.py reads. varuna-run must add up the micro-batches' losses
the way the model reduces, exactly: summed for a sum; a mean cross_entropy
(also two-means: a mean over the tokens that are not 0 plus half a mean over
the examples, BERT pre-training's masked-LM + next-sentence pattern)
divides by the labels it counts over the whole step; a ratio weighs each
micro-batch by its own divisor, computed from its inputs. Not exactly:
mixed, two-means plus a mean of squares over the hidden states, whose
micro-batches varuna-run weighs by one count.
--ignored-rows N: every label of the first N examples is 0 (ignored by the
mean losses): a micro-batch of them has no label to average over.
--padding-idx k: the tied embedding is nn.Embedding(padding_idx=k), whose
lookup passes no gradient to row k (the output projection still does);
--format torchscript writes OUTDIR/model.pt instead. --freeze: block 0's
first linear layer does not require grad (stays as it is). --unused: the
model also has a pooler the loss never reads (PyTorch: its gradient stays
None, so SGD never changes it; ONNX export drops it, TorchScript keeps it).
--label-smoothing s: the mean loss smooths its labels (TorchScript only:
the ONNX exporter refuses it)."""
import argparse
import json
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import varuna

ap = argparse.ArgumentParser()
ap.add_argument("outdir")
ap.add_argument("--loss", required=True, choices=["sum", "mean", "sum-scaled", "ratio", "masked", "two-means", "mixed", "sum-mean"])
ap.add_argument("--ignored-rows", type=int, default=0,
                help="the first N examples' labels are all 0 (ignored)")
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--padding-idx", type=int, default=None,
                help="the (tied) embedding's padding_idx")
ap.add_argument("--label-smoothing", type=float, default=0.0)
ap.add_argument("--freeze", action="store_true",
                help="block 0's first linear layer does not require grad")
ap.add_argument("--unused", action="store_true",
                help="a pooler (nn.Linear) the loss never reads")
ap.add_argument("--format", default="onnx", choices=["onnx", "torchscript"],
                help="OUTDIR/model.onnx or OUTDIR/model.pt")
args = ap.parse_args()
VOCAB, SEQ, DIM = 40, 5, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(DIM)
        self.fc1, self.fc2 = nn.Linear(DIM, 2 * DIM), nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM, padding_idx=args.padding_idx)
        self.blocks = nn.ModuleList(Block() for _ in range(4))
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.emb.weight
        if args.unused:  # created last: the other parameters stay the same
            self.pooler = nn.Linear(DIM, DIM)

    def forward(self, ids, labels):
        h = self.emb(ids)
        aux = h.pow(2).mean()  # a mean over the examples, on the first stage
        for b in self.blocks:
            h = b(h)
        logits = self.head(h).flatten(0, 1)
        if args.loss in ("two-means", "mixed"):  # tokens except 0, plus every example's first
            loss = (F.cross_entropy(logits, labels.flatten(), ignore_index=0)
                    + 0.5 * F.cross_entropy(self.head(h[:, 0]), labels[:, 1]))
            return loss + 0.01 * h.pow(2).mean() if args.loss == "mixed" else loss
        if args.loss == "mean":
            return F.cross_entropy(logits, labels.flatten(), ignore_index=0,
                                   label_smoothing=args.label_smoothing)
        loss = F.cross_entropy(logits, labels.flatten(), reduction="sum", ignore_index=0)
        if args.loss == "ratio":  # a mean over the counted labels, by hand
            return loss / (labels != 0).sum()
        if args.loss == "masked":  # Megatron's: per-token losses x a mask
            mask = (labels != 0).float().flatten()
            per_token = F.cross_entropy(logits, labels.flatten(), reduction="none")
            return (per_token * mask).sum() / mask.sum()
        if args.loss == "sum-mean":  # a sum plus a mean
            return loss / 100.0 + 0.1 * aux
        return loss / 100.0 if args.loss == "sum-scaled" else loss


torch.manual_seed(0)
model = Model()
if args.freeze:
    model.blocks[0].fc1.requires_grad_(False)
g = torch.Generator().manual_seed(1)
n = 24
ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)
labels = torch.randint(0, VOCAB, (n, SEQ), generator=g)  # some 0s: ignored
labels[:args.ignored_rows] = 0
os.makedirs(os.path.join(args.outdir, "data"), exist_ok=True)
np.save(os.path.join(args.outdir, "data", "ids.npy"), ids.numpy())
np.save(os.path.join(args.outdir, "data", "labels.npy"), labels.numpy())
model_file = "model.onnx" if args.format == "onnx" else "model.pt"
varuna.export(model, (ids[:2], labels[:2]), os.path.join(args.outdir, model_file),
              input_names=["ids", "labels"])
lr = 0.01 if args.loss == "sum" else 0.1
json.dump({"optimizer": {"type": "sgd", "lr": lr}},
          open(os.path.join(args.outdir, "train.json"), "w"))
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
losses = []
for step in range(args.steps):
    idx = [(step * args.batch + j) % n for j in range(args.batch)]
    loss = model(ids[idx], labels[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
json.dump({"losses": losses}, open(os.path.join(args.outdir, "expected.json"), "w"))
os.makedirs(os.path.join(args.outdir, "params"), exist_ok=True)
for name, p in model.named_parameters():  # what varuna-run trains (and dumps)
    if not p.requires_grad:
        continue
    np.save(os.path.join(args.outdir, "params", name + ".npy"), p.detach().numpy())
print("oracle", args.loss, "losses", losses[0], "->", losses[-1])
