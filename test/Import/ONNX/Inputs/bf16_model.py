"""A model whose parameters are bfloat16 (model.to(torch.bfloat16)), GELU
inside: torch's ONNX export writes its constants (1/sqrt(2), 1, 0.5) as
BFLOAT16 tensors, which the importer could not read. Writes OUT/bf16.onnx,
OUT/data/{x,y}.npy and prints PyTorch's loss of the first 4 samples; and
OUT/bfin.pt, a model whose input itself is bfloat16 (which .npy cannot
hold).

    python3 bf16_model.py OUT
"""
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "python"))
from varuna.export import export  # noqa: E402


class G(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.b = nn.Linear(8, 3)

    def forward(self, x, y):
        return F.cross_entropy(self.b(F.gelu(self.a(x.to(torch.bfloat16)))).float(), y)


out = sys.argv[1]
os.makedirs(os.path.join(out, "data"), exist_ok=True)
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 4)).astype(np.float32)
y = rng.integers(0, 3, 8).astype(np.int64)
np.save(os.path.join(out, "data", "x.npy"), x)
np.save(os.path.join(out, "data", "y.npy"), y)
torch.manual_seed(0)
model = G().to(torch.bfloat16)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # onnxruntime has no bfloat16 Gemm
    export(model, (torch.from_numpy(x[:4]), torch.from_numpy(y[:4])),
           os.path.join(out, "bf16.onnx"))


class BfInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)

    def forward(self, x, y):
        return F.cross_entropy(self.a(x.float()), y)


bf_inputs = (torch.randn(4, 4).to(torch.bfloat16), torch.from_numpy(y[:4]))
try:  # varuna.export refuses an input varuna-run cannot read
    export(BfInput(), bf_inputs, os.path.join(out, "bfin.pt"))
    raise SystemExit("varuna.export took a bfloat16 input")
except ValueError as e:
    print("export refused:", str(e).splitlines()[0][:60])
# varuna-run's own refusal, for a file written without that check.
from varuna.export import _export_torchscript  # noqa: E402
_export_torchscript(BfInput(), bf_inputs, os.path.join(out, "bfin.pt"), input_names=["x", "y"],
                    loss_name="loss", batch_dim=0)
print(f"torch loss {model(torch.from_numpy(x[:4]), torch.from_numpy(y[:4])).item():.6f}")
