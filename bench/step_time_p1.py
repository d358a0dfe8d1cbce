"""Benchmark: one training step of a GPT-style model, varuna-run (P = 1, the
reference executor) against PyTorch eager training of the same nn.Module --
same thread count, same global batch and micro-batch, same optimizer (AdamW).

    python3 bench/step_time_p1.py [--build build] [--layers 4] [--hidden 256]
        [--seq 128] [--vocab 1024] [--batch 16] [--micro-batch 4] [--steps 20]

Prints the median step time of each and their ratio (varuna / PyTorch; the
issue's target is at most 1.0). The first 3 steps of each are warm-up."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import numpy as np  # noqa: E402
import torch  # noqa: E402

import varuna  # noqa: E402
from varuna import models  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--hidden", type=int, default=256)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--seq", type=int, default=128)
ap.add_argument("--vocab", type=int, default=1024)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--micro-batch", type=int, default=4)
ap.add_argument("--steps", type=int, default=20)
args = ap.parse_args()
threads = torch.get_num_threads()
cfg = dict(layers=args.layers, hidden=args.hidden, heads=args.heads, seq=args.seq,
           vocab=args.vocab)
work = tempfile.mkdtemp(prefix="varuna-bench-")
model, example, names = models.make("gpt", batch=args.micro_batch, **cfg)
varuna.export(model, example, os.path.join(work, "gpt.onnx"))
rng = np.random.default_rng(0)
n = args.batch * 4
os.makedirs(os.path.join(work, "data"))
data = {name: rng.integers(0, args.vocab, size=(n, args.seq)).astype(np.int64) for name in names}
for name, arr in data.items():
    np.save(os.path.join(work, "data", name + ".npy"), arr)
json.dump({"optimizer": {"type": "adamw", "lr": 1e-4}},
          open(os.path.join(work, "train.json"), "w"))

# PyTorch eager: micro-batches with gradient accumulation, like varuna-run.
model, _, _ = models.make("gpt", **cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
times = []
micro = args.batch // args.micro_batch
for step in range(args.steps):
    t = time.perf_counter()
    opt.zero_grad()
    for j in range(micro):
        idx = [(step * args.batch + j * args.micro_batch + i) % n for i in range(args.micro_batch)]
        loss = model(*[torch.from_numpy(data[k][idx]) for k in names]) / micro
        loss.backward()
    opt.step()
    times.append(time.perf_counter() - t)
torch_step = statistics.median(times[3:])

bin_dir = os.path.join(args.build, "bin")
subprocess.run([os.path.join(bin_dir, "varuna-compile"), os.path.join(work, "gpt.onnx"),
                "-o", os.path.join(work, "job")], check=True, stdout=subprocess.DEVNULL)
subprocess.run([os.path.join(bin_dir, "varuna-run"), os.path.join(work, "job"),
                "--batch", str(args.batch), "--micro-batch", str(args.micro_batch),
                "--steps", str(args.steps), "--data", os.path.join(work, "data"),
                "--config", os.path.join(work, "train.json"),
                "--metrics", os.path.join(work, "m.jsonl")],
               check=True, stdout=subprocess.DEVNULL)
vt = [json.loads(line)["step_seconds"] for line in open(os.path.join(work, "m.jsonl"))]
varuna_step = statistics.median(vt[3:])
print(f"GPT {args.layers}x{args.hidden}, seq {args.seq}, vocab {args.vocab}, batch "
      f"{args.batch} in micro-batches of {args.micro_batch}, {threads} threads")
print(f"PyTorch eager:        {torch_step * 1e3:8.1f} ms/step")
print(f"varuna-run (P=1 ref): {varuna_step * 1e3:8.1f} ms/step")
print(f"ratio varuna / PyTorch: {varuna_step / torch_step:.3f}")
