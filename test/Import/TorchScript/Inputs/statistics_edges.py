"""statistics_edges.py OUTDIR: edge cases of the statistics functions the
TorchScript importer composes (lib/Import/TorchScript/
TorchScriptStatistics.cpp) -- quantile at q = 0 and 1, of all elements with
keepdim, tensor levels with "higher"; kthvalue at k = n; cummax / cummin
along dim 0 and -1 and with ties (torch returns the last occurrence);
trapezoid over one sample and by points; nanmean / nansum of everything;
count_nonzero over every dimension; kron of different ranks; block_diag
of a 0-D, a 1-D and a 2-D tensor; rot90 by -3; cov and corrcoef; ldexp;
sums and products of a mask (int64, as torch: they were summed as i1),
floor / trunc division of integers and floats; vector norms of any p;
linalg.norm (Frobenius,
matrix 1 / -1 / inf / -inf); stft (1-D and 2-D,
win_length < n_fft, normalized, two-sided, center=False, the real layout).
Each is a model whose loss reads it, exported with varuna.export,
imported by varuna-translate and evaluated by varuna-eval (tools from
PATH); the oracle is PyTorch's loss. Prints one line per case and
"N cases, N equal"."""
import os
import sys

import numpy as np
import torch
import torch.nn as nn

import varuna
from evaluate import evaluate

STATIC = torch.arange(12.).reshape(3, 4)  # tensors that are not per example
CASES = {
    "quantile_ends": lambda h: torch.quantile(h, 0.0, dim=1).sum()
    + torch.quantile(h, 1.0, dim=1, keepdim=True).sum(),
    "quantile_all_keepdim": lambda h: (h.sum() * torch.quantile(
        STATIC ** 1.1, torch.tensor([0.2, 0.8]), keepdim=True)).sum()
    + torch.quantile(torch.arange(7.) ** 2, 0.5),
    "quantile_higher": lambda h: torch.quantile(
        h, torch.tensor([0.0, 0.33, 1.0]), dim=1, interpolation="higher").sum(),
    "kthvalue_last": lambda h: torch.kthvalue(h, h.shape[1], dim=1, keepdim=True)[0].sum()
    + torch.kthvalue(h, 1)[1].float().sum(),
    "cummax_dims": lambda h: torch.cummax(h.t(), 0)[0].sum()
    + torch.cummin(h, -1)[1].float().sum(),
    "cummax_ties": lambda h: torch.cummax(torch.round(h * 2) / 2, 1)[1].float().sum()
    + torch.cummin(torch.round(h * 2) / 2, 1)[0].sum(),
    "trapezoid": lambda h: torch.trapezoid(h[:, :1], dim=1).sum() + torch.trapz(h, dx=2.0).sum()
    + torch.trapezoid(h, torch.linspace(0, 1, 6)[None, :].expand(h.shape[0], -1)).sum(),
    "nan_reductions": lambda h: torch.nanmean(torch.where(h > 0.5, float("nan"), h))
    + torch.nansum(h, dim=(0, 1)),
    "count_nonzero": lambda h: torch.count_nonzero(h > 0).float()
    + torch.count_nonzero(h > 0, dim=(0, 1)).float() + h.sum() * 0,
    "kron_ranks": lambda h: (torch.kron(torch.arange(6.).reshape(2, 3) * h.mean(),
                                        torch.ones(2, 1, 3))
                             * torch.arange(36.).reshape(2, 2, 9)).sum(),
    "block_diag": lambda h: (torch.block_diag(h.mean(), torch.ones(3), torch.eye(2))
                             * torch.arange(24.).reshape(4, 6)).sum(),
    "rot90": lambda h: (torch.rot90((torch.arange(12.).reshape(2, 6) * h.mean())[None], -3,
                                    [1, 2]) * torch.arange(12.).reshape(1, 6, 2)).sum(),
    "cov_corrcoef": lambda h: (torch.cov(STATIC ** 1.5 * h.mean()) * STATIC[:, :3]).sum()
    + torch.corrcoef(STATIC ** 1.3 + h.mean()).sum() + torch.cov(STATIC[0], correction=0),
    "ldexp": lambda h: torch.ldexp(h, torch.tensor([[1, -2, 0, 3, 1, 1]])).sum(),
    # sorting integers keeps them integers, exact past 2^24 (they were
    # sorted as f32 and came back as floats)
    "integer_sort": lambda h: (torch.sort((h * 1e8).long() + 123456789, dim=1).values % 1000)
    .float().sum() + torch.argsort(-(h * 10).long(), dim=1).float().sum()
    + torch.topk((h > 0).long(), 2, dim=1).values.float().sum(),
    "integer_sums": lambda h: (h > 0).sum(-1).float().sum() + (h > 0).sum()
    + torch.div((h * 10).long() - 7, 3, rounding_mode="floor").float().sum()
    + torch.div(h * 10, 3, rounding_mode="trunc").sum() + (h > -1).prod(1).float().sum(),
    "vector_norms": lambda h: torch.linalg.vector_norm(h, 3, dim=1).sum()
    + torch.norm(h.abs() + 0.1, p=0.5, dim=0).sum()
    + torch.linalg.vector_norm(h, -float("inf"), dim=1).sum()
    + torch.linalg.norm(h, -1.5, dim=1, keepdim=True).sum(),
    "linalg_norm": lambda h: torch.linalg.norm(h.reshape(-1, 2, 3), dim=(1, 2)).sum()
    + torch.linalg.norm(h) + torch.linalg.norm(h, "fro", dim=(0, 1))
    + torch.linalg.norm(STATIC * h.mean(), 1) + torch.linalg.norm(STATIC * h.mean(), -1)
    + torch.linalg.norm(STATIC * h.mean(), float("inf"))
    + torch.linalg.norm(h.reshape(-1, 2, 3), -float("inf"), dim=(1, 2), keepdim=True).sum(),
    "stft_variants": lambda h: (
        torch.stft(torch.sin(torch.arange(64.) * h.mean()), 16, 4, 12, torch.hann_window(12),
                   normalized=True, return_complex=False) ** 2).sum()
    + torch.stft(torch.cos(torch.arange(64.) * h.mean())[None].expand(2, -1), 8,
                 onesided=False, center=False, return_complex=True).abs().sum()
    + torch.stft(h, 4, 2, window=torch.ones(4), return_complex=True).real.sum(),
}


class Case(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 6))

    def forward(self, x):
        return self.f(x * self.w).sum()


out = sys.argv[1]
torch.manual_seed(0)
x = torch.randn(4, 6)
equal = 0
for name, f in CASES.items():
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    model = Case(f)
    want = model(x).item()
    varuna.export(model, (x,), os.path.join(d, "m.pt"), input_names=["x"])
    np.save(os.path.join(d, "in", "x.npy"), x.numpy())
    got = evaluate(d)
    ok = abs(got - want) <= 1e-5 * max(1.0, abs(want))
    equal += ok
    print(f"{name}: {'equal' if ok else 'DIFFERENT'} (varuna {got!r}, torch {want!r})")
print(f"{len(CASES)} cases, {equal} equal")
