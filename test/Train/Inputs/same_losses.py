"""same_losses.py FULL.jsonl PART.jsonl: every step in PART has exactly the
loss the uninterrupted run FULL had at that step (a resumed run continues
bit for bit)."""
import json
import sys

full = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1]))}
part = [json.loads(line) for line in open(sys.argv[2])]
assert part, "no steps"
for r in part:
    assert r["loss"] == full[r["step"]], (r["step"], r["loss"], full[r["step"]])
print("same losses for steps", [r["step"] for r in part])
