"""check_trace.py TRACE.json STAGES REPLICAS STEPS MICRO: the merged timeline
has one process per rank, named after its stage and replica, and on each
rank exactly STEPS * MICRO forward and backward spans (recompute spans on
all but the last stage, Varuna schedule), plus communication spans."""
import json
import sys

path, P, D, steps, micro = sys.argv[1], *map(int, sys.argv[2:6])
t = json.load(open(path))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in t if e.get("name") == "process_name"}
assert sorted(names) == list(range(P * D)), names
for rank in range(P * D):
    stage, replica = rank % P, rank // P
    assert names[rank] == f"stage {stage} / replica {replica}", names[rank]
    spans = [e["name"] for e in t if e.get("pid") == rank and e.get("ph") == "X"]
    count = lambda c: sum(1 for s in spans if s[0] == c and s[1:].isdigit())
    assert count("F") == steps * micro, (rank, count("F"))
    assert count("B") == steps * micro, (rank, count("B"))
    want_r = 0 if stage == P - 1 else steps * micro
    assert count("R") == want_r, (rank, count("R"), want_r)
    assert any(s.startswith("allreduce") for s in spans), rank
    if stage > 0:
        assert any(s.startswith("recv act") for s in spans), rank
print(f"ok: {P * D} ranks, {len(t)} events")
