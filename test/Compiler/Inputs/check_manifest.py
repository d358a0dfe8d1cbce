"""Checks a varuna-compile manifest.json against what the model must give."""
import json
import sys

path, model = sys.argv[1], sys.argv[2]
m = json.load(open(path))
for key in ("cut_points", "sections", "ties", "inputs", "partitions", "global_reductions"):
    assert key in m, f"{path}: missing '{key}'"
k = len(m["sections"])
assert len(m["cut_points"]) == k - 1, (len(m["cut_points"]), k)
for c in m["cut_points"]:
    assert c["bytes_per_example"] > 0, c
for s in m["sections"]:
    assert isinstance(s["parameters"], list) and s["flops_per_example"] >= 0, s
# Every trainable parameter is read by some section.
assert sum(len(s["parameters"]) for s in m["sections"]) >= m["trainable_parameters"]
ties = [(t["parameter"], t["sections"]) for t in m["ties"]]
expected_ties = {
    "gpt": [("wte.weight", [0, k - 1])],
    "bert": [("embeddings.word_embeddings.weight", [0, k - 1])],
    "vit": [], "resnet": [], "convnext": [],
}[model]
assert ties == expected_ties, (model, ties)
# A tie's bytes: one copy, part of every section that reads it.
for t in m["ties"]:
    assert 0 < t["bytes"] and t["bytes"] % 4 == 0, t
    for i in t["sections"]:
        assert t["bytes"] <= m["sections"][i]["param_bytes"], (t, m["sections"][i])
# Balanced partitions: every P from 1 (or only the requested one), boundaries
# cover all sections in order.
for p in m["partitions"]:
    b = p["boundaries"]
    assert b[0] == 0 and b[-1] == k and b == sorted(b) and len(b) == p["stages"] + 1, p
inputs = m["inputs"]
assert inputs == [i["name"] for i in m["input_specs"]], m["input_specs"]
assert all(i["shape"][0] == "B" for i in m["input_specs"]), m["input_specs"]
expected_inputs = {
    "gpt": ["input_ids", "labels"],
    "bert": ["input_ids", "attention_mask", "labels"],
    "vit": ["pixel_values", "labels"], "resnet": ["pixel_values", "labels"],
    "convnext": ["pixel_values", "labels"],
}[model]
assert inputs == expected_inputs, inputs
print(model, "ok:", k, "sections,", len(m["partitions"]), "partitions, ties", ties, "inputs", inputs)
