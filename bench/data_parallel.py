"""Benchmark: data parallelism (P = 1, D = 2, one rank per core) -- varuna-run
with gradient buckets (--bucket-mb, here 4 MiB: a few for this GPT's 14 MB;
each all-reduced during the last backward once its gradients are final), varuna-run with all gradients in
one bucket (--bucket-mb 100000: the sum starts when the backward ends), and
PyTorch DistributedDataParallel on the Gloo backend (its own 25 MiB buckets,
no_sync() on all but the last micro-batch) -- same GPT, batch, micro-batch,
optimizer (AdamW) and one thread per rank.

    python3 bench/data_parallel.py [--build build] [--layers 4] [--hidden 256]
        [--batch 16] [--micro-batch 4] [--steps 10] [--bucket-mb 4]
        [--repeats 3] [--emulate-bandwidth-mbps B]

The three run in turn, --repeats times (this machine's speed drifts: taking
turns spreads the drift over all three). Prints each one's median step time
over all its runs (the first 2 steps of a run are warm-up), the
ratio DDP / varuna (above 1: varuna is faster), and from varuna's timelines
how long rank 0 waits after its last backward for the gradient sum and the
loss (the communication the buckets did not hide)."""
import argparse
import json
import os
import statistics
import subprocess
from functools import partial

import benchlib
import torch
import torch.multiprocessing as mp
from varuna import models


def ddp_step(args, cfg, rank):
    """Rank `rank`'s DDP training step (AdamW, micro-batches accumulated
    under no_sync() but the last)."""
    torch.manual_seed(0)
    gpt, _, _ = models.make("gpt", **cfg)
    model = torch.nn.parallel.DistributedDataParallel(gpt, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1 + rank)
    per_rank = args.batch // 2
    micro = per_rank // args.micro_batch

    def step():
        ids = torch.randint(0, args.vocab, (per_rank, args.seq), generator=g)
        opt.zero_grad()
        for j in range(micro):
            mb = ids[j * args.micro_batch:(j + 1) * args.micro_batch]
            if j + 1 < micro:
                with model.no_sync():
                    (model(mb, mb) / micro).backward()
            else:
                (model(mb, mb) / micro).backward()
        opt.step()
    return step


def main():
    ap = argparse.ArgumentParser()
    benchlib.gpt_options(ap, layers=4, hidden=256, seq=128, vocab=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    # 4 MiB: a few buckets for the 14 MB of this GPT (25 MiB would be one).
    ap.add_argument("--bucket-mb", type=float, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--emulate-bandwidth-mbps", type=float, default=0,
                    help="a slow network for the all-reduces (varuna-run's emulation, "
                         "--emulate-collectives; DDP cannot be slowed alike and is skipped)")
    args = ap.parse_args()
    cfg = benchlib.gpt_config(args)
    work, job, _ = benchlib.adamw_gpt_job(args, "varuna-dp-bench-", batch=args.micro_batch)

    emulate = (["--emulate-bandwidth-mbps", str(args.emulate_bandwidth_mbps),
                "--emulate-collectives"] if args.emulate_bandwidth_mbps else [])

    def varuna_run(bucket_mb, tag):
        metrics = os.path.join(work, f"m-{tag}.jsonl")
        trace = os.path.join(work, f"t-{tag}.json")
        subprocess.run([benchlib.tool(args, "varuna-run"), job, "--replicas", "2",
                        "--bucket-mb", str(bucket_mb),
                        "--batch", str(args.batch), "--micro-batch", str(args.micro_batch),
                        "--steps", str(args.steps), "--synthetic", "--synthetic-vocab",
                        str(args.vocab), "--config", os.path.join(work, "train.json"),
                        "--metrics", metrics, "--trace", trace] + emulate,
                       check=True, stdout=subprocess.DEVNULL)
        t = [json.loads(line)["step_seconds"] for line in open(metrics)][2:]
        events = json.load(open(trace))["traceEvents"]
        waits = {}
        for e in events:
            if e.get("pid") == 0 and e.get("name") in ("wait gradient buckets",
                                                       "allreduce loss"):
                waits.setdefault(e["name"], []).append(e["dur"] / 1e3)
        exposed = sum(statistics.median(v[2:]) for v in waits.values())
        buckets = sum(1 for e in events if e.get("pid") == 0 and
                      e.get("name", "").startswith("allreduce bucket")) / args.steps
        return t, exposed, buckets

    runs = {"varuna 1x2, buckets": args.bucket_mb, "varuna 1x2, one bucket": 100000}
    steps = {k: [] for k in runs}
    exposed = {k: [] for k in runs}
    buckets = {}
    ddp_steps = []
    for r in range(args.repeats):
        for k, mb in runs.items():
            t, e, n = varuna_run(mb, f"{mb}-{r}")
            steps[k] += t
            exposed[k].append(e)
            buckets[k] = n
        if not emulate:
            out = os.path.join(work, f"ddp-{r}.json")
            mp.spawn(benchlib.torch_worker_steps, nprocs=2,
                     args=(benchlib.free_port(), args.steps, partial(ddp_step, args, cfg),
                           out))
            ddp_steps += json.load(open(out))[2:]
    ddp = statistics.median(ddp_steps) if ddp_steps else None
    results = {k: (statistics.median(steps[k]), statistics.median(exposed[k]), buckets[k])
               for k in runs}

    print(f"GPT {args.layers}x{args.hidden}, seq {args.seq}, vocab {args.vocab}, batch "
          f"{args.batch} in micro-batches of {args.micro_batch}, 2 replicas, one thread "
          f"per rank, buckets of {args.bucket_mb:g} MiB"
          + (f", all-reduces over an emulated {args.emulate_bandwidth_mbps:g} Mbit/s link"
             if emulate else ""))
    for k, (sec, exposed, n) in results.items():
        print(f"  {k:28s} {sec * 1e3:8.1f} ms/step   {n:4.1f} buckets/step   "
              f"waits after the last backward {exposed:6.1f} ms")
    if ddp is not None:
        print(f"  {'torch DDP (gloo)':28s} {ddp * 1e3:8.1f} ms/step")
        print(f"ratio DDP / varuna (buckets): {ddp / results['varuna 1x2, buckets'][0]:.2f}")
    print(f"ratio one bucket / buckets:   "
          f"{results['varuna 1x2, one bucket'][0] / results['varuna 1x2, buckets'][0]:.2f}")


if __name__ == "__main__":
    main()
