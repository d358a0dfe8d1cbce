"""check_buckets.py TRACE.json RANKS STEPS: with data parallelism each rank
all-reduces its gradients in more than one bucket per step, and in every
step at least one bucket starts before the rank's last backward ends (its
gradients were final during the backward: the all-reduce overlaps it)."""
import json
import sys

path, ranks, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = json.load(open(path))["traceEvents"]
early_total = buckets_total = 0
for rank in range(ranks):
    spans = sorted((e for e in t if e.get("pid") == rank and e.get("ph") == "X"),
                   key=lambda e: e["ts"])
    # A step ends with the optimizer.
    step, per_step = [], []
    for e in spans:
        step.append(e)
        if e["name"] == "optimizer":
            per_step.append(step)
            step = []
    assert len(per_step) == steps, (rank, len(per_step))
    for k, sp in enumerate(per_step):
        # The tasks that add to the gradients: B, and W (zero-bubble).
        back = [e for e in sp if e["name"][0] in "BW" and e["name"][1:].isdigit()]
        bucket = [e for e in sp if e["name"].startswith("allreduce bucket ")]
        assert back and len(bucket) > 1, (rank, k, len(back), len(bucket))
        last_end = back[-1]["ts"] + back[-1]["dur"]
        early = [e for e in bucket if e["ts"] < last_end]
        assert early, (rank, k, "no bucket started during the last backward")
        early_total += len(early)
        buckets_total += len(bucket)
print(f"ok: {buckets_total} buckets, {early_total} started during the last backward")
