"""check_trace.py TRACE.json STAGES REPLICAS STEPS MICRO [SCHEDULE]: the
merged timeline has one process per rank, named after its stage and
replica, and on each rank exactly STEPS * MICRO forward and backward spans,
recompute spans on all but the last stage (SCHEDULE varuna, the default, or
gpipe), W spans on all but the first stage (SCHEDULE zb/N: N per step, the
backwards the schedule splits) and none otherwise, plus communication
spans; no rank ever holds two recomputed sets (an R(k) run, its B(k) not:
the run-time deviation ran R1 R2 R3 ahead while waiting for B0's
gradient)."""
import json
import sys

path, P, D, steps, micro = sys.argv[1], *map(int, sys.argv[2:6])
schedule = sys.argv[6] if len(sys.argv) > 6 else "varuna"
schedule, _, split = schedule.partition("/")
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
    recomputes = schedule in ("varuna", "gpipe") and stage < P - 1
    assert count("R") == (steps * micro if recomputes else 0), (rank, count("R"))
    splits = schedule == "zb" and stage > 0
    assert count("W") == (steps * int(split) if splits else 0), (rank, count("W"))
    assert any(s.startswith("allreduce") for s in spans), rank
    held = most = 0
    for e in sorted((e for e in t if e.get("pid") == rank and e.get("ph") == "X"
                     and e["name"][:1] in "RB" and e["name"][1:].isdigit()),
                    key=lambda e: e["ts"]):
        held = held + 1 if e["name"][0] == "R" else max(held - 1, 0)
        most = max(most, held)
    assert most <= 1, (rank, "holds", most, "recomputed sets")
    if stage > 0:
        assert any(s.startswith("recv act") for s in spans), rank
print(f"ok: {P * D} ranks, {len(t)} events")
