"""hf_oracle.py OUTDIR NAME [--steps S] [--batch M] [--optimizer adamw|sgd]
                [--clip X] [--dropout] [--format onnx|torchscript] [--dict]
                [--module FILE:FACTORY]:
a tiny, randomly initialised Hugging Face model (test/Import/ONNX/Inputs/
hf_models.py: the user's own wrapper returning the loss HF computes from the
labels) as a user would train it with Varuna, and plain PyTorch's training
of the same model as the oracle. Writes OUTDIR/model.onnx (varuna.export;
OUTDIR/model.pt with --format torchscript;
every dropout probability 0 unless --dropout, so that both runs are
deterministic), OUTDIR/data/<input>.npy (24 examples, fixed seed; masked-LM
labels are -100 where not masked, as HF's collator leaves them; with
bert-pretraining also a next-sentence label per example),
OUTDIR/train.json, and PyTorch's S steps over batches of M (whole batch,
torch.optim): OUTDIR/expected.json (loss per step), OUTDIR/params/<name>.npy
and OUTDIR/degenerate (what compare_training.py reads). --dict: the zoo
model without its wrapper, exported with a dict batch and trained as
model(**batch).loss (parameter names without the wrapper's "m."). --module: the
model is FACTORY() from the Python file FILE (same contract as an entry of
hf_models.MODELS: returns (model, example inputs)); NAME then only names
it."""
import argparse
import inspect
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "Import", "ONNX",
                                "Inputs"))
import hf_models  # noqa: E402
from oracle_common import write_degenerate  # noqa: E402
import varuna  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("outdir")
ap.add_argument("name", help="one of " + ", ".join(sorted(hf_models.MODELS)))
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
ap.add_argument("--clip", type=float, default=None)
ap.add_argument("--dropout", action="store_true", help="keep the model's dropout")
ap.add_argument("--format", default="onnx", choices=["onnx", "torchscript"],
                help="OUTDIR/model.onnx or OUTDIR/model.pt")
ap.add_argument("--dict", action="store_true",
                help="export and train the zoo model without its wrapper, called as "
                     "model(**batch) (its ModelOutput's loss), as a Hugging Face user would")
ap.add_argument("--module", default=None,
                help="FILE:FACTORY building (model, example inputs) instead of a zoo model")
args = ap.parse_args()
if args.module:
    import importlib.util
    path, _, factory = args.module.rpartition(":")
    spec = importlib.util.spec_from_file_location("user_module", path)
    user_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(user_module)
    make_model = getattr(user_module, factory)
elif args.name in hf_models.MODELS:
    make_model = hf_models.MODELS[args.name]
else:
    ap.error(f"unknown model '{args.name}' (and no --module)")
N = 24


def build():
    torch.manual_seed(0)
    model, example = make_model()
    return (model if args.dropout else hf_models.no_dropout(model)), example


model, example = build()
names = list(inspect.signature(model.forward).parameters)
g = torch.Generator().manual_seed(1)
data = []
for name, t in zip(names, example):
    shape = (N,) + tuple(t.shape[1:])
    if name == "input_ids":
        data.append(torch.randint(0, hf_models.V, shape, generator=g))
    elif name == "labels" and "input_ids" in names and \
            t.equal(example[names.index("input_ids")]):  # language-model labels
        labels = data[names.index("input_ids")].clone()
        if "bert" in args.name or args.name in ("roberta", "albert", "deberta"):
            labels[torch.rand(shape, generator=g) > 0.3] = -100  # only masked positions
        data.append(labels)
    elif name == "labels" and "input_ids" not in names:  # image classes
        data.append(torch.randint(0, 10, shape, generator=g))
    elif name == "lengths":  # sequence lengths for pack_padded_sequence: each
        # batch sorted longest first (its default enforce_sorted), at most
        # the example's longest
        v = torch.randint(1, int(t.max()) + 1, shape, generator=g)
        data.append(torch.cat([c.sort(descending=True).values for c in v.split(args.batch)]))
    elif name == "next_sentence_label":
        data.append(torch.randint(0, 2, shape, generator=g))
    elif not t.is_floating_point():  # other integers: in the example's range
        data.append(torch.randint(int(t.min()), int(t.max()) + 1, shape,
                                  generator=g).to(t.dtype))
    else:
        data.append(torch.randn(shape, generator=g))
os.makedirs(os.path.join(args.outdir, "data"), exist_ok=True)
for name, t in zip(names, data):
    np.save(os.path.join(args.outdir, "data", name + ".npy"), t.numpy())
if args.dict:  # the Hugging Face model itself, with a dict batch
    model, example = model.m, dict(zip(names, example))
varuna.export(model, example, os.path.join(
    args.outdir, "model.onnx" if args.format == "onnx" else "model.pt"))
# Exporting may run the model (a batch norm's running statistics move): the
# oracle starts again from the freshly built weights, as the file holds them.
model, _ = build()
if args.dict:
    model = model.m
if not model.training:  # (modules built in eval mode, e.g. a frozen batch norm, stay so)
    model.train()

lr = 1e-3 if args.optimizer == "adamw" else 1e-2
config = {"optimizer": {"type": args.optimizer, "lr": lr, "weight_decay": 0.01}}
params = [p for p in model.parameters() if p.requires_grad]
if args.optimizer == "adamw":
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
else:
    opt = torch.optim.SGD(params, lr=lr, weight_decay=0.01)
if args.clip:
    config["clip_grad_norm"] = args.clip
json.dump(config, open(os.path.join(args.outdir, "train.json"), "w"))

losses = []
def real(t):  # a complex tensor as (real, imaginary) pairs
    return torch.view_as_real(t) if t.is_complex() else t


max_grad = {n: torch.zeros_like(real(p)) for n, p in model.named_parameters()}
for step in range(args.steps):
    idx = [(step * args.batch + j) % N for j in range(args.batch)]
    if args.dict:
        loss = model(**{n: t[idx] for n, t in zip(names, data)}).loss
    else:
        loss = model(*(t[idx] for t in data))
    opt.zero_grad()
    loss.backward()
    for n, p in model.named_parameters():
        if p.grad is not None:
            max_grad[n] = torch.maximum(max_grad[n], real(p.grad).abs())
    if args.clip:
        torch.nn.utils.clip_grad_norm_(params, args.clip)
    opt.step()
    losses.append(loss.item())
json.dump({"losses": losses}, open(os.path.join(args.outdir, "expected.json"), "w"))
os.makedirs(os.path.join(args.outdir, "params"), exist_ok=True)
trained = [n for n, p in model.named_parameters() if p.requires_grad]
for n, p in model.named_parameters():
    if p.requires_grad:
        # A complex parameter as (real, imaginary) pairs: how varuna holds it.
        np.save(os.path.join(args.outdir, "params", n + ".npy"), real(p.detach()).numpy())
write_degenerate(args.outdir, max_grad, trained)
print("oracle", args.name, "losses", losses[0], "->", losses[-1])
