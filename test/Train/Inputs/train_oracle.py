"""PyTorch training oracle for varuna-run.

    train_oracle.py MODEL OUTDIR --steps S --batch M [--optimizer sgd|adamw|lamb]
                    [--clip X] [--samples N] [--precision fp32|bf16|fp16]
                    [--loss-scale INITIAL,BACKOFF] [--config JSON]
                    [--micro-batch m [--replicas D]] [--lr-schedule JSON]

Builds the zoo model (same seed, hence the same initial weights as the
exported test model), writes a dataset OUTDIR/data/<input>.npy (N samples,
fixed seed), a training configuration OUTDIR/train.json, trains S steps with
plain PyTorch -- step s on samples [s*M, (s+1)*M) mod N, the whole batch in
one forward, torch.optim -- and writes OUTDIR/expected.json (loss per step)
and OUTDIR/params/<name>.npy (final parameters; floating-point buffers
such as BatchNorm's running statistics in OUTDIR/buffers/<name>.npy).
With --precision bf16 or
fp16 the forward runs under torch.autocast("cpu", dtype); fp16 (and bf16
with --loss-scale) scales the loss with torch.amp.GradScaler, and
expected.json also lists the steps it skipped. --config: keyword arguments
of models.make (e.g. '{"layers": 4}'), the same the exported model used.
--micro-batch m (fp32): each step accumulates the gradients of micro-batches
of m, each normalized with its own batch-norm statistics and updating the
running ones in turn, as D = --replicas replicas over the batch's
consecutive parts that start from the same running statistics and end the
step with their mean -- what varuna-run does with --micro-batch m and
--replicas D (for models without batch norm, the same as the whole batch).
--lr-schedule: the training configuration's lr_schedule (warmup_steps 0 or
>= 2), followed with torch.optim.lr_scheduler's own schedulers (LinearLR
for the warm-up, then CosineAnnealingLR -- held at min_lr by a ConstantLR
after decay_steps, as torch's is periodic -- or LinearLR or ConstantLR, in a
SequentialLR), stepped after every optimizer step."""
import argparse
import json
import os
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
from varuna import models  # noqa: E402
from oracle_common import write_degenerate  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("outdir")
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--samples", type=int, default=40)
ap.add_argument("--optimizer", default="adamw")
ap.add_argument("--clip", type=float, default=None)
ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
ap.add_argument("--config", default="{}", help="models.make keyword arguments (JSON)")
ap.add_argument("--loss-scale", default=None,
                help="INITIAL,BACKOFF of the dynamic loss scale")
ap.add_argument("--micro-batch", type=int, default=None,
                help="train with gradient accumulation over micro-batches of this size")
ap.add_argument("--lr-schedule", default=None)
ap.add_argument("--no-decay", default=None,
                help='JSON list: parameters whose name contains one are not decayed')
ap.add_argument("--no-decay-1d", action="store_true",
                help="parameters of fewer than 2 dimensions are not decayed")
ap.add_argument("--replicas", type=int, default=1,
                help="with --micro-batch: replicas whose running statistics are averaged")
args = ap.parse_args()
micro = args.micro_batch or args.batch
if (args.batch % (args.replicas * micro) or
        (micro < args.batch and (args.precision != "fp32" or args.loss_scale))):
    raise SystemExit("--micro-batch x --replicas must divide --batch, in fp32")

torch.manual_seed(0)
model, example, names = models.make(args.model, **json.loads(args.config))
model.train()
g = np.random.default_rng(1234)
data = {}
for name, t in zip(names, example):
    shape = (args.samples,) + tuple(t.shape[1:])
    if t.dtype.is_floating_point:
        data[name] = g.standard_normal(shape).astype(np.float32)
    else:
        hi = 64 if name != "attention_mask" else 2
        if args.model in ("vit", "resnet", "convnext") and name == "labels":
            hi = 10
        arr = g.integers(0, hi, size=shape).astype(np.int64)
        if name == "attention_mask":
            arr[:, :4] = 1  # every sequence attends to something
        if name == "labels" and args.model == "bert":
            arr[g.random(shape) < 0.3] = -100  # ignored positions
        data[name] = arr
os.makedirs(os.path.join(args.outdir, "data"), exist_ok=True)
for name, arr in data.items():
    np.save(os.path.join(args.outdir, "data", name + ".npy"), arr)

opt_cfg = {"type": args.optimizer, "lr": 1e-2 if args.optimizer == "sgd" else 1e-3}
params = [p for p in model.parameters()]
# The usual param groups: the excluded parameters without weight decay.
no_decay = json.loads(args.no_decay) if args.no_decay else []
def decayed(name, p):
    return not (any(s in name for s in no_decay) or (args.no_decay_1d and p.dim() < 2))
groups = [{"params": [p for n, p in model.named_parameters() if decayed(n, p)]},
          {"params": [p for n, p in model.named_parameters() if not decayed(n, p)],
           "weight_decay": 0.0}]
groups = [g for g in groups if g["params"]]
if no_decay:
    opt_cfg["no_weight_decay"] = no_decay
if args.no_decay_1d:
    opt_cfg["no_weight_decay_1d"] = True
if args.optimizer == "sgd":
    opt_cfg.update(momentum=0.9, weight_decay=0.01)
    opt = torch.optim.SGD(groups, lr=opt_cfg["lr"], momentum=0.9, weight_decay=0.01)
elif args.optimizer == "adamw":
    opt_cfg.update(weight_decay=0.01)
    opt = torch.optim.AdamW(groups, lr=opt_cfg["lr"], weight_decay=0.01)
else:
    raise SystemExit("the oracle trains sgd and adamw (LAMB has no torch.optim)")
config = {"optimizer": opt_cfg}
sched = None
if args.lr_schedule:
    ls = json.loads(args.lr_schedule)
    config["lr_schedule"] = ls
    lrs = torch.optim.lr_scheduler
    warmup, decay = ls.get("warmup_steps", 0), ls.get("decay", "none")
    assert warmup != 1, "the oracle takes warmup_steps 0 or >= 2"
    parts = [lrs.LinearLR(opt, start_factor=1 / warmup, end_factor=1.0,
                          total_iters=warmup - 1)] if warmup else []
    milestones = [warmup] if warmup else []
    if decay == "cosine":  # periodic in torch: held at min_lr after T_max
        parts.append(lrs.CosineAnnealingLR(opt, T_max=ls["decay_steps"],
                                           eta_min=ls.get("min_lr", 0.0)))
        parts.append(lrs.ConstantLR(opt, factor=ls.get("min_lr", 0.0) / opt_cfg["lr"],
                                    total_iters=10**9))
        milestones.append(warmup + ls["decay_steps"])
    elif decay == "linear":
        parts.append(lrs.LinearLR(opt, start_factor=1.0,
                                  end_factor=ls.get("min_lr", 0.0) / opt_cfg["lr"],
                                  total_iters=ls["decay_steps"]))
    else:
        parts.append(lrs.ConstantLR(opt, factor=1.0, total_iters=0))
    sched = lrs.SequentialLR(opt, parts, milestones=milestones) if len(parts) > 1 else parts[0]
if args.clip:
    config["clip_grad_norm"] = args.clip
dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
scaler = None
if args.precision != "fp32":
    config["precision"] = args.precision
if args.precision == "fp16" or args.loss_scale:
    initial, backoff = (float(x) for x in (args.loss_scale or "65536,0.5").split(","))
    config["loss_scale"] = {"initial": initial, "backoff_factor": backoff,
                            "growth_factor": 2.0, "growth_interval": 2000}
    scaler = torch.amp.GradScaler("cpu", init_scale=initial, backoff_factor=backoff,
                                  growth_factor=2.0, growth_interval=2000)
json.dump(config, open(os.path.join(args.outdir, "train.json"), "w"))

losses, skipped = [], []
# Per element, the largest gradient seen: elements whose gradient is zero
# in exact arithmetic are marked (compare_training.py leaves them out).
max_grad = {name: torch.zeros_like(p) for name, p in model.named_parameters()}


def track_grads():
    for name, p in model.named_parameters():
        if p.grad is not None:
            max_grad[name] = torch.maximum(max_grad[name], p.grad.detach().abs())


def stats():
    return {k: b for k, b in model.named_buffers() if b.is_floating_point()}


def micro_batched_step(batch):
    """Gradient accumulation over micro-batches of --micro-batch (each
    normalized with its own batch-norm statistics, the running ones updated
    once per micro-batch in order), as --replicas replicas that start from
    the same running statistics and leave the step with their mean; the
    backward of the loss of the whole batch; returns that loss."""
    start = {k: b.clone() for k, b in stats().items()}
    ends = []
    per_replica = args.batch // args.replicas
    total = 0.0
    for r in range(args.replicas):
        with torch.no_grad():
            for k, b in stats().items():
                b.copy_(start[k])
        for off in range(r * per_replica, (r + 1) * per_replica, micro):
            part = [t[off:off + micro] for t in batch]
            loss = model(*part) * (micro / args.batch)
            loss.backward()
            total += float(loss)
        ends.append({k: b.clone() for k, b in stats().items()})
    with torch.no_grad():
        for k, b in stats().items():
            b.copy_(sum(e[k] for e in ends) / len(ends))
    return total


n = args.samples
for step in range(args.steps):
    if sched is not None and step > 0:
        sched.step()  # after the previous step's optimizer step
    idx = [(step * args.batch + j) % n for j in range(args.batch)]
    batch = [torch.from_numpy(data[name][idx]) for name in names]
    opt.zero_grad()
    if micro < args.batch:
        losses.append(micro_batched_step(batch))
        track_grads()
        if args.clip:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        continue
    if dtype is None:
        loss = model(*batch)
    else:
        with torch.autocast("cpu", dtype=dtype):
            loss = model(*batch)
    if scaler is None:
        loss.backward()
        track_grads()
        if args.clip:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
    else:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        track_grads()
        if args.clip:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        if scaler.get_scale() < before:
            skipped.append(step)
    losses.append(loss.item())
json.dump({"losses": losses, "skipped": skipped},
          open(os.path.join(args.outdir, "expected.json"), "w"))
os.makedirs(os.path.join(args.outdir, "params"), exist_ok=True)
for name, p in model.named_parameters():
    np.save(os.path.join(args.outdir, "params", name + ".npy"), p.detach().numpy())
# Floating-point buffers (BatchNorm's running statistics), the state training
# updates besides the parameters.
for name, b in model.named_buffers():
    if b.is_floating_point():
        os.makedirs(os.path.join(args.outdir, "buffers"), exist_ok=True)
        np.save(os.path.join(args.outdir, "buffers", name + ".npy"), b.numpy())
marked = write_degenerate(args.outdir, max_grad)
print("oracle", args.model, "losses", losses[0], "->", losses[-1],
      f"({marked} zero-gradient elements)")
