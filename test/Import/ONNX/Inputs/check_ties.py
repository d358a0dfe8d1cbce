"""check_ties.py MANIFEST [TIED_PARAM] [--shared PREFIX]: the job has exactly
that tie (or none), spanning the first and last section, and every cut
carries only the residual stream (the same bytes per example at every cut).
--shared: parameters named PREFIX... may be tied too, over any sections (a
layer applied several times, ALBERT's: each stage holding an application
keeps a copy)."""
import json
import sys

args = sys.argv[1:]
shared = None
if "--shared" in args:
    i = args.index("--shared")
    shared = args[i + 1]
    del args[i:i + 2]
m = json.load(open(args[0]))
k = len(m["sections"])
ties = [(t["parameter"], t["sections"]) for t in m["ties"]
        if shared is None or not t["parameter"].startswith(shared)]
want = [(args[1], [0, k - 1])] if len(args) > 1 else []
assert ties == want, (ties, want)
sizes = {c["bytes_per_example"] for c in m["cut_points"]}
assert len(sizes) <= 1, sizes
print("ok", k, "sections", ties)
