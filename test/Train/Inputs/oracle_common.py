"""Shared by the PyTorch oracles (train_oracle.py, hf_oracle.py)."""
import os

import numpy as np


def write_degenerate(outdir, max_grad, names=None):
    """Marks the elements whose largest gradient over the run stayed below
    1e-6 of the largest of all: zero in exact arithmetic (an attention key
    bias), so Adam-style updates move them by rounding noise and
    compare_training.py leaves them out. Writes OUTDIR/degenerate/<name>.npy
    for the parameters (of `names`, default all) that have any; returns how
    many elements were marked."""
    largest = max(float(g.max()) for g in max_grad.values())
    marked = 0
    for name, g in max_grad.items():
        if names is not None and name not in names:
            continue
        mask = (g < 1e-6 * largest).numpy()
        if mask.any():
            os.makedirs(os.path.join(outdir, "degenerate"), exist_ok=True)
            np.save(os.path.join(outdir, "degenerate", name + ".npy"), mask)
            marked += int(mask.sum())
    return marked
