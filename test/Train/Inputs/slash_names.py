"""checkpoint-load.test: a model whose parameter names hold a slash (an
nn.ModuleDict key "task/a"), exported to OUT/n.pt with data in OUT/d; with
--check DUMP CKPT: the dump's files (slash written %2F) equal the
checkpoint's tensors loaded into the module.

    slash_names.py OUT [--check DUMP CKPT]"""
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
import varuna  # noqa: E402
import varuna.checkpoint as vc  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"task/a": nn.Linear(8, 3)})

    def forward(self, x, y):
        return F.cross_entropy(self.heads["task/a"](x), y)


out = sys.argv[1]
if len(sys.argv) == 2:
    torch.manual_seed(0)
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    os.makedirs(os.path.join(out, "d"), exist_ok=True)
    np.save(os.path.join(out, "d", "x.npy"), x.numpy())
    np.save(os.path.join(out, "d", "y.npy"), y.numpy())
    varuna.export(Net(), (x[:4], y[:4]), os.path.join(out, "n.pt"), input_names=["x", "y"])
else:
    dump, ckpt = sys.argv[3], sys.argv[4]
    model = Net()
    vc.load_into(model, ckpt)
    for name, p in model.named_parameters():
        file = os.path.join(dump, name.replace("%", "%25").replace("/", "%2F") + ".npy")
        assert np.array_equal(np.load(file), p.detach().numpy()), name
        print("dumped as", os.path.basename(file), "equal to the checkpoint's")
