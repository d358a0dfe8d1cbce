"""Benchmark: how much throughput each schedule loses to network jitter.
P = 4 stages, 8 micro-batches, a GPT-style model, over the transport's
network emulation (this machine's kernel has no netem). Three conditions per
schedule: no delay; every activation and gradient message delayed by a
steady 5 ms; delayed by 5 ms +/- 5 ms (uniform, seeded). The issue's target
compares the loss *to jitter* -- jittery vs the same mean delay without
jitter: Varuna's schedule (with its run-time deviation) loses at most half
of what GPipe loses. Also printed: the loss against no delay at all, which
includes the latency itself (a pipeline's fill and drain pay it whatever the
schedule).

Varuna's static order is planned for the link, as varuna-plan does: the
message time in forward times, rounded up (--schedule-latency; by default
computed from varuna-calibrate's forward times of this job: 5 ms over one
stage's forward of a micro-batch). GPipe's order is fixed.

    python3 bench/jitter.py [--build build] [--layers 8] [--hidden 128] [--seq 64]
        [--latency-ms 5] [--jitter-ms 5] [--steps 12] [--repeats 5]
        [--schedule-latency T]

Four ranks share this machine's two cores: expect noise of several percent.
Each round runs every configuration once; the loss to jitter is taken
within a round (jittery against steady) and its median over --repeats
rounds reported."""
import argparse
import json
import math
import os
import statistics
import subprocess

import benchlib

ap = argparse.ArgumentParser()
benchlib.gpt_options(ap, layers=8, hidden=128, seq=64, vocab=512)
ap.add_argument("--latency-ms", type=float, default=5)
ap.add_argument("--jitter-ms", type=float, default=5)
ap.add_argument("--bandwidth-mbps", type=float, default=0,
                help="also limit each link's bandwidth (0: unlimited)")
ap.add_argument("--schedule-latency", type=int, default=-1,
                help="latency (in forward times) Varuna's static order plans for "
                     "(default: from the calibration, as varuna-plan)")
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--repeats", type=int, default=5)
args = ap.parse_args()

work, job, _ = benchlib.compiled_gpt(args, "varuna-jitter-", batch=2)

if args.schedule_latency < 0:
    # What varuna-plan plans for: one message over one stage's forward.
    subprocess.run([benchlib.tool(args, "varuna-calibrate"), job,
                    "--micro-batches", "2", "--no-comm"], check=True, stdout=subprocess.DEVNULL)
    cal = json.load(open(os.path.join(job, "calibration.json")))
    forward = sum(sec["forward_seconds"][0] for sec in cal["sections"]) / 4
    args.schedule_latency = math.ceil(args.latency_ms * 1e-3 / forward)
    print(f"stage forward {forward * 1e3:.2f} ms per micro-batch: Varuna's order planned "
          f"for {args.schedule_latency} forward times")


def run(schedule, condition, seed):
    metrics = os.path.join(work, "m.jsonl")
    cmd = [benchlib.tool(args, "varuna-run"), job, "--stages", "4",
           "--schedule", schedule, "--batch", "16", "--micro-batch", "2",
           "--steps", str(args.steps), "--synthetic", "--synthetic-vocab", str(args.vocab),
           "--metrics", metrics]
    if schedule == "varuna":
        cmd += ["--schedule-latency", str(args.schedule_latency)]
    if condition != "none":
        cmd += ["--emulate-latency-ms", str(args.latency_ms), "--emulate-jitter-ms",
                str(args.jitter_ms if condition == "jitter" else 0), "--emulate-seed",
                str(seed), "--emulate-bandwidth-mbps", str(args.bandwidth_mbps)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    t = [json.loads(line)["step_seconds"] for line in open(metrics)][2:]
    return 16 / statistics.median(t)


conditions = ("none", "steady", "jitter")
runs = {}
for seed in range(args.repeats):  # interleaved rounds, so slow drifts hit all alike
    for schedule in ("varuna", "gpipe"):
        for c in conditions:
            runs.setdefault((schedule, c), []).append(run(schedule, c, seed))
res = {k: statistics.median(v) for k, v in runs.items()}
print(f"GPT {args.layers}x{args.hidden}, seq {args.seq}; P=4, 8 micro-batches of 2; "
      f"messages delayed {args.latency_ms} ms, then {args.latency_ms} +/- {args.jitter_ms} ms"
      + (f", links of {args.bandwidth_mbps} Mbit/s" if args.bandwidth_mbps else "")
      + f"; {args.repeats} rounds")
loss = {}
for schedule in ("varuna", "gpipe"):
    n, st, j = (res[(schedule, c)] for c in conditions)
    # The loss to jitter within each round (jittery vs steady, run minutes
    # apart at most), then the median over rounds.
    per_round = [1 - jr / sr for sr, jr in zip(runs[(schedule, "steady")],
                                               runs[(schedule, "jitter")])]
    loss[schedule] = statistics.median(per_round)
    print(f"  {schedule:7s} examples/s: {n:6.1f} no delay, {st:6.1f} steady, {j:6.1f} jitter "
          f"(medians); loses {100 * loss[schedule]:5.1f}% to jitter (rounds: "
          f"{' '.join(f'{100 * x:.1f}' for x in per_round)}), "
          f"{100 * (1 - j / n):5.1f}% to delay + jitter")
if loss["gpipe"] > 0:
    print(f"Varuna's loss to jitter / GPipe's: {loss['varuna'] / loss['gpipe']:.2f}  (target <= 0.5)")
else:
    print(f"GPipe lost nothing to jitter here (noise); Varuna lost {100 * loss['varuna']:.1f}%")
