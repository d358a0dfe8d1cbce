"""Benchmark: the simulator's predicted mini-batch time against the measured
one. For several configurations of a GPT-style job (P x D, schedule,
micro-batch size) predicts with `varuna-plan --simulate` and measures with
`varuna-run` (median step after two warm-up steps), and prints the table and
the median / worst relative error (the issue's targets: 5% and 10%) of the
2-rank configurations (one rank per core of this machine), then the same for
3- and 4-rank ones, which share the two cores: those are predicted with
`--shared-cores 2` (the simulator slows each task by how many ranks compute
at once over the cores) and reported apart.

This machine's speed drifts by 10-20% within minutes, so a prediction from a
calibration taken minutes before the measurement mixes the simulator's error
with the drift. The bench therefore runs every configuration in each of
--rounds rounds, and predicts each measurement twice: from a calibration
taken right before it (`varuna-calibrate --micro-batches m`, nothing of the
configuration but m; the "adjacent" error) and from the one calibration
taken at the start (the "once" error). A configuration's error compares the
median of its rounds' predictions with the median of its rounds'
measurements; the targets are judged on the adjacent one.

    python3 bench/accuracy.py [--build build] [--layers 4] [--hidden 256]
        [--seq 128] [--batch 16] [--steps 12] [--rounds 3] [--markdown]"""
import argparse
import json
import os
import re
import statistics
import subprocess

import benchlib

ap = argparse.ArgumentParser()
benchlib.gpt_options(ap, layers=4, hidden=256, seq=128, vocab=1024)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--markdown", action="store_true")
args = ap.parse_args()

work, job, _ = benchlib.compiled_gpt(args, "varuna-accuracy-", batch=2)
cores = os.cpu_count()


def calibrate(out, sizes, oversubscribed):
    subprocess.run([benchlib.tool(args, "varuna-calibrate"), job, "-o", out,
                    "--micro-batches", sizes, "--repeats", "9"]
                   + ([] if oversubscribed else ["--no-oversubscribed"]),
                   check=True, stdout=subprocess.DEVNULL)


def predict(calibration, P, D, m, s):
    shared = ["--shared-cores", str(cores)] if P * D > cores else []
    out = subprocess.run([benchlib.tool(args, "varuna-plan"), job, "--simulate", "--stages", str(P),
                          "--replicas", str(D), "--batch", str(args.batch), "--micro-batch",
                          str(m), "--schedule", s, "--schedule-latency", "0",
                          "--calibration", calibration] + shared,
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r": ([0-9.]+) s per mini-batch", out).group(1))


def measure(P, D, m, s):
    metrics = os.path.join(work, "m.jsonl")
    # One stage has no schedule (varuna-run warns about --schedule there).
    schedule = ["--schedule", s] if P > 1 else []
    subprocess.run([benchlib.tool(args, "varuna-run"), job, "--stages", str(P), "--replicas",
                    str(D), "--batch", str(args.batch), "--micro-batch", str(m)] + schedule
                   + ["--steps", str(args.steps), "--synthetic", "--synthetic-vocab",
                      str(args.vocab), "--metrics", metrics], check=True,
                   stdout=subprocess.DEVNULL)
    return statistics.median(json.loads(line)["step_seconds"] for line in open(metrics))


configs = [  # (P, D, m, schedule)
    (2, 1, 2, "varuna"), (2, 1, 2, "gpipe"), (2, 1, 2, "1f1b"), (2, 1, 2, "zb"),
    (2, 1, 1, "varuna"), (2, 1, 4, "1f1b"), (1, 2, 2, "varuna"), (1, 2, 4, "varuna"),
    # More ranks than cores.
    (3, 1, 2, "varuna"), (4, 1, 2, "varuna"), (2, 2, 2, "varuna"), (2, 2, 2, "1f1b"),
    (1, 4, 2, "varuna"),
]
once = os.path.join(work, "calibration-once.json")
calibrate(once, "1,2,4", True)
runs = {c: [] for c in configs}  # (adjacent prediction, once prediction, measured)
for r in range(args.rounds):
    for P, D, m, s in configs:
        adjacent = os.path.join(work, "calibration-adjacent.json")
        calibrate(adjacent, str(m), P * D > cores)
        runs[(P, D, m, s)].append((predict(adjacent, P, D, m, s), predict(once, P, D, m, s),
                                   measure(P, D, m, s)))

rows = []
for (P, D, m, s), rs in runs.items():
    # Robust on both sides: a slow minute spoils one calibration or one
    # measurement, not the medians.
    adjacent = statistics.median(a for a, _, _ in rs)
    first = statistics.median(o for _, o, _ in rs)
    measured = statistics.median(q for _, _, q in rs)
    rows.append((P, D, m, s, adjacent, measured, abs(adjacent - measured) / measured,
                 abs(first - measured) / measured, (adjacent - measured) / measured))

print(f"GPT {args.layers}x{args.hidden}, seq {args.seq}, batch {args.batch}, {cores} cores, "
      f"{args.rounds} rounds")
if args.markdown:
    print("| P x D | m | schedule | predicted s | measured s | error (adjacent) "
          "| error (once) | predicted - measured |")
    print("|---|---|---|---|---|---|---|---|")
for P, D, m, s, p, q, e, o, signed in rows:
    note = " (shared cores)" if P * D > cores else ""
    if args.markdown:
        print(f"| {P}x{D}{note} | {m} | {s} | {p:.3f} | {q:.3f} | {100 * e:.1f}% "
              f"| {100 * o:.1f}% | {100 * signed:+.1f}% |")
    else:
        print(f"  {P}x{D} m={m} {s:7s} predicted {p:.3f} s, measured {q:.3f} s, error "
              f"{100 * e:5.1f}% adjacent, {100 * o:5.1f}% once, signed "
              f"{100 * signed:+5.1f}%{note}")
for label, group in (("one rank per core", [r for r in rows if r[0] * r[1] <= cores]),
                     ("more ranks than cores", [r for r in rows if r[0] * r[1] > cores])):
    if group:
        for which, i in (("adjacent calibration", 6), ("one calibration", 7)):
            errors = [r[i] for r in group]
            print(f"{label}, {which}: median error {100 * statistics.median(errors):.1f}% "
                  f"(target 5%), worst {100 * max(errors):.1f}% (target 10%)")
