"""matrix.py WORKDIR: exactness of P x D training over a pairwise design.

The factors of issue 5's exactness matrix -- model (GPT with 4 layers, BERT,
ViT), P x D (2x1, 4x1, 3x1 with uneven stages, 2x2, 1x2), micro-batches per
replica (1, 4, 8), schedule (varuna, gpipe, 1f1b, zb) and optimizer (SGD, AdamW,
LAMB; all with global-norm clipping) -- have 540 combinations (fewer that
fit: P must not exceed the model's sections). Every run of the full product
would take an hour here; this runs a covering design instead: a set of
configurations in which every pair of factor values that can occur
together occurs at least once (built greedily, deterministically). Each
configuration trains 10 steps of a global batch of 16 and is compared with
plain PyTorch (SGD, AdamW: train_oracle.py) or, for LAMB, which torch.optim
lacks, with the single-process varuna-run (its LAMB is checked against an
independent implementation in test/Runtime): per-step losses and final
parameters within 1e-5 (compare_training.py; elements whose gradient is
zero in exact arithmetic, like the attention key bias, are left out:
Adam-style steps move them by the sign of rounding noise).

Prints one line per configuration and "ok: N configurations cover all M
pairs"; exits 1 at the first mismatch."""
import itertools
import json
import os
import subprocess
import sys

import varuna
from varuna import models

work = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
os.makedirs(work, exist_ok=True)

MODELS = {"gpt": {"layers": 4}, "bert": {}, "vit": {}}
LAYOUTS = [(2, 1), (4, 1), (3, 1), (2, 2), (1, 2)]
MICRO = [1, 4, 8]
SCHEDULES = ["varuna", "gpipe", "1f1b", "zb"]
OPTIMIZERS = ["sgd", "adamw", "lamb"]
BATCH, STEPS = 16, 10


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print("FAIL:", " ".join(cmd), "\n", r.stdout[-2000:], r.stderr[-2000:])
        sys.exit(1)
    return r.stdout


# Export and compile each model; its section count bounds P.
sections = {}
for name, cfg in MODELS.items():
    model, example, _ = models.make(name, batch=2, **cfg)
    onnx = os.path.join(work, name + ".onnx")
    varuna.export(model, example, onnx)
    run(["varuna-compile", onnx, "-o", os.path.join(work, name + "-job")])
    manifest = json.load(open(os.path.join(work, name + "-job", "manifest.json")))
    sections[name] = max(p["stages"] for p in manifest["partitions"])

factors = [list(MODELS), LAYOUTS, MICRO, SCHEDULES, OPTIMIZERS]
allowed = [c for c in itertools.product(*factors) if c[1][0] <= sections[c[0]]]


def pairs(c):
    return {(i, c[i], j, c[j]) for i, j in itertools.combinations(range(len(c)), 2)}


uncovered = set().union(*(pairs(c) for c in allowed))
total = len(uncovered)
design = []
while uncovered:
    best = max(allowed, key=lambda c: len(pairs(c) & uncovered))
    design.append(best)
    uncovered -= pairs(best)

# Oracles: PyTorch for SGD and AdamW, the single-process run for LAMB (on
# the data, and over the same steps the zero-gradient elements, of a PyTorch
# oracle). The PyTorch oracles run first, in one process (oracles.py).
oracle, torch_jobs = {}, []
for name, opt in sorted({(c[0], c[4]) for c in design}):
    out = os.path.join(work, f"{name}-{opt}")
    common = ["--steps", str(STEPS), "--batch", str(BATCH), "--config", json.dumps(MODELS[name])]
    if opt == "lamb":
        data = os.path.join(work, f"{name}-data")
        torch_jobs.append([name, data] + common)
        oracle[name, opt] = (f"run:{out}/ref.jsonl:{out}/ref", os.path.join(data, "data"),
                             os.path.join(out, "train.json"))
    else:
        torch_jobs.append([name, out, "--optimizer", opt, "--clip", "1.0"] + common)
        oracle[name, opt] = (out, os.path.join(out, "data"), os.path.join(out, "train.json"))
cmd = [sys.executable, os.path.join(here, "oracles.py")]
for job in torch_jobs:
    cmd += (["+"] if len(cmd) > 2 else []) + [os.path.join(here, "train_oracle.py")] + job
run(cmd)
for name, opt in sorted(oracle):
    if opt != "lamb":
        continue
    out = os.path.join(work, f"{name}-{opt}")
    os.makedirs(out, exist_ok=True)
    json.dump({"optimizer": {"type": "lamb", "lr": 0.01, "weight_decay": 0.01},
               "clip_grad_norm": 1.0}, open(os.path.join(out, "train.json"), "w"))
    run(["varuna-run", os.path.join(work, name + "-job"), "--batch", str(BATCH),
         "--micro-batch", str(BATCH), "--steps", str(STEPS), "--data",
         oracle[name, opt][1], "--config", os.path.join(out, "train.json"),
         "--metrics", os.path.join(out, "ref.jsonl"), "--dump-params", os.path.join(out, "ref")])

for k, (name, (P, D), micro, schedule, opt) in enumerate(design):
    m = BATCH // (D * micro)
    ref, data, config = oracle[name, opt]
    tag = f"{k}-{name}-{P}x{D}-{micro}-{schedule}-{opt}"
    metrics = os.path.join(work, tag + ".jsonl")
    params = os.path.join(work, tag + "-params")
    run(["varuna-run", os.path.join(work, name + "-job"), "--stages", str(P),
         "--replicas", str(D), "--schedule", schedule, "--batch", str(BATCH),
         "--micro-batch", str(m), "--steps", str(STEPS), "--data", data, "--config", config,
         "--metrics", metrics, "--dump-params", params, "--timeout", "60"])
    extra = []
    if ref.startswith("run:") and os.path.isdir(os.path.join(data, "..", "degenerate")):
        extra = ["--degenerate", os.path.join(data, "..", "degenerate")]
    verdict = run([sys.executable, os.path.join(here, "compare_training.py"), ref, metrics,
                   params] + extra).strip().splitlines()[-1]
    print(f"{name:4s} {P}x{D} {micro} micro-batches/replica {schedule:6s} {opt:5s} "
          f"(m={m}): {verdict}")
print(f"ok: {len(design)} configurations cover all {total} pairs")
