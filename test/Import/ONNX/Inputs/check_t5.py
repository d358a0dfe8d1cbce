"""The T5 job ties the shared embedding across three sections (encoder input,
decoder input, output head): the first, a middle and the last section."""
import json
import sys

m = json.load(open(sys.argv[1]))
k = len(m["sections"])
ties = {t["parameter"]: t["sections"] for t in m["ties"]}
secs = ties.get("m.shared.weight")
assert secs and len(secs) == 3 and secs[0] == 0 and secs[-1] == k - 1, ties
print("ok", k, "sections, shared.weight in", secs)
