"""same_losses.py FULL.jsonl PART.jsonl [RTOL]: every step in PART has exactly
the loss the uninterrupted run FULL had at that step (a resumed run continues
bit for bit); with RTOL, within that relative tolerance (a run resumed under
another P x D adds its gradients in another order)."""
import json
import sys

full = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1]))}
part = [json.loads(line) for line in open(sys.argv[2])]
assert part, "no steps"
rtol = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
for r in part:
    want = full[r["step"]]
    assert abs(r["loss"] - want) <= rtol * abs(want), (r["step"], r["loss"], want)
print("same losses for steps", [r["step"] for r in part])
