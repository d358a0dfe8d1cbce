"""check_running_stats.py EXPECTED CHECKPOINT_DIR [RTOL] [--means-only]:
the batch_norm running statistics in the newest step-* checkpoint of
CHECKPOINT_DIR (all its section files) equal EXPECTED's -- a
train_oracle.py output directory (its buffers/<name>.npy, from PyTorch) or
another checkpoint directory. Every expected statistic must be in the
checkpoint. Elementwise |a - b| <= RTOL * max(|b|, 1) (default 1e-5).
--means-only: compare the running means alone (D replicas average
theirs, which gives the full batch's mean but not its variance)."""
import glob
import os
import re
import sys

import numpy as np
from safetensors.numpy import load_file

args = [a for a in sys.argv[1:] if a != "--means-only"]
means_only = "--means-only" in sys.argv
expected_dir, ckpt_dir = args[0], args[1]
rtol = float(args[2]) if len(args) > 2 else 1e-5


def newest(d):
    steps = [p for p in glob.glob(os.path.join(d, "step-*")) if re.search(r"step-\d+$", p)]
    if not steps:
        sys.exit(f"no step-* checkpoint in {d}")
    return max(steps, key=lambda p: int(p.rsplit("-", 1)[1]))


def stats_of_checkpoint(d):
    out = {}
    for f in glob.glob(os.path.join(newest(d), "section-*.safetensors")):
        for k, v in load_file(f).items():
            if k.endswith(("running_mean", "running_var")):
                out[k] = v
    return out


if os.path.isdir(os.path.join(expected_dir, "buffers")):
    expected = {os.path.basename(f)[:-4]: np.load(f)
                for f in glob.glob(os.path.join(expected_dir, "buffers", "*.npy"))}
    expected = {k: v for k, v in expected.items()
                if k.endswith(("running_mean", "running_var"))}
else:
    expected = stats_of_checkpoint(expected_dir)
got = stats_of_checkpoint(ckpt_dir)
if not expected:
    sys.exit(f"{expected_dir}: no running statistics")
compared = 0
for name, e in sorted(expected.items()):
    if means_only and not name.endswith("running_mean"):
        continue
    if name not in got:
        sys.exit(f"{name}: not in the checkpoint (it has {len(got)} statistics)")
    err = float(np.max(np.abs(got[name] - e) / np.maximum(np.abs(e), 1.0)))
    if err > rtol:
        sys.exit(f"{name}: relative error {err:.3g} > {rtol} "
                 f"(got {got[name].ravel()[:3]}, expected {e.ravel()[:3]})")
    compared += 1
print(f"running statistics: {compared} equal")
