"""check_ties.py MANIFEST [TIED_PARAM]: the job has exactly that tie (or
none), spanning the first and last section, and every cut carries only the
residual stream (the same bytes per example at every cut)."""
import json
import sys

m = json.load(open(sys.argv[1]))
k = len(m["sections"])
ties = [(t["parameter"], t["sections"]) for t in m["ties"]]
want = [(sys.argv[2], [0, k - 1])] if len(sys.argv) > 2 else []
assert ties == want, (ties, want)
sizes = {c["bytes_per_example"] for c in m["cut_points"]}
assert len(sizes) <= 1, sizes
print("ok", k, "sections", ties)
