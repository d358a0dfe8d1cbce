"""Writes small TorchScript archives for the importer's edge and error tests.

    python3 make_models.py OUTDIR

plain.pt        traced with torch.jit.save only (no varuna.json)
tied.pt         head.weight is wte.weight, reached through both module paths
unsupported.pt  uses torch.special.erfcx (no varuna mapping)
smoothing.pt    cross_entropy with label_smoothing=0.1 (imported since it is supported)
noncontig.pt    a parameter stored transposed (non-contiguous), saved by
                torch.jit.save (varuna.export stores it contiguous:
                noncontig_export.pt)
ops.pt          a grab bag of ops: chunk, stack, where, clamp, sdpa, ...
cache.pt        what Hugging Face's causal LMs do in training: a key cache
                that starts as a 1-D empty tensor (torch.cat skips it) and
                labels shifted with F.pad(value=-100)
hfops.pt        more of what Hugging Face models trace to: cumsum of an int
                mask (position ids), new_ones, elementwise torch.min, relu6,
                table[index] (a relative-position bias), .T
written.pt      in-place writes into a slice and an index (T5's shift right),
                repeat / repeat_interleave (GPT-J's rotary tables),
                an in-place multiply of a slice, a write into a constant
                tensor, group_norm (PoolFormer), torch.min of a constant tensor read
                back as a size (Swin's window), max along a dimension;
                written.inputs/ and written.expected.json hold inputs of
                batch 3 and PyTorch's loss on them
aliased.pt      writes into a slice while a view taken before is read after
viewwrite.pt    an in-place write through a reshape of a tensor read after
perbatch.pt     divides something other than a sum by x.shape[0]
channeldrop.pt  Dropout2d in training (whole channels dropped)
longsort.pt     sorts 2000 elements (over the quadratic selection's limit)
sortbatch.pt    sorts across the examples (an argsort of every token)
pairs.pt        reshapes consecutive examples into pairs (view(-1, 2, 4))
packed.pt       a GRU over a sequence packed with constant lengths (not
                one per example)
padnototal.pt   pad_packed_sequence without total_length
bagoffsets.pt   nn.EmbeddingBag over a 1-D input with offsets (bags of
                different sizes)
gridmode.pt     F.grid_sample with padding_mode="reflection"
ctclist.pt      F.ctc_loss with the lengths as Python lists
ctcflat.pt      F.ctc_loss with the targets concatenated into one 1-D tensor
sortedrows.pt   the labels sorted across the examples, then used as labels
contrastive.pt  InfoNCE over the batch (every example against every other)
spectral.pt     spectral_norm in training mode (its power iteration writes
                the buffers u and v with out=)
maxnorm.pt      nn.Embedding(max_norm=1.0), which rescales the weight in place
complexcast.pt  a complex tensor converted to float (drops the imaginary part)
complexop.pt    sigmoid of a complex tensor
complexfftbatch.pt torch.fft.fft over the batch dimension
randbig.pt      torch.randint over 2^25 values (drawn as float32: not exact)
batchwrite.pt   x[idx] = 0 (index_fill_) with idx indexing the examples (dimension 0)
unique.pt       torch.unique of the labels (a data-dependent size)
emabuf.pt       an EMA buffer updated in place (its result unused) and read
                after (the update was dropped silently)
instancetrack.pt nn.InstanceNorm1d(track_running_stats=True), traced by hand
                (varuna.export refuses it): its running statistics would be
                dropped
cumsumbatch.pt  cumsum over the examples (dimension 0); logcumsumbatch.pt
                logcumsumexp over them (both aborted the importer once)
"""
import os
import sys

import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "python"))
from varuna.export import export  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x, y):
        return F.cross_entropy(self.fc(x), y)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(32, 8)
        self.head = nn.Linear(8, 32, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, ids, labels):
        logits = self.head(torch.tanh(self.wte(ids)))
        return F.cross_entropy(logits.reshape(-1, 32), labels.reshape(-1))


class Unsupported(Plain):
    def forward(self, x, y):
        return F.cross_entropy(torch.special.erfcx(self.fc(x)), y)


class Smoothing(Plain):
    def forward(self, x, y):
        return F.cross_entropy(self.fc(x), y, label_smoothing=0.1)


class NonContig(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 8).t())

    def forward(self, x, y):
        return F.cross_entropy(x @ self.w, y)


class Ops(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.register_buffer("scale", torch.ones(8))
        self.out = nn.Linear(8, 4)

    def forward(self, x, y):
        b = x.shape[0]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, 4, 2, 4).transpose(1, 2)
        k = k.view(b, 4, 2, 4).transpose(1, 2)
        v = v.view(b, 4, 2, 4).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = a.transpose(1, 2).reshape(b, 4, 8) * self.scale
        a = torch.where(a > 0, a, a * 0.1).clamp(-5.0, 5.0)
        s = torch.stack([a.mean(1), a.amax(1)], dim=1).sum(1)
        h = F.log_softmax(self.out(F.silu(s)), dim=-1)
        return F.nll_loss(h, y)


class Cache(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = nn.Linear(8, 8)
        self.out = nn.Linear(8, 4)

    def forward(self, x, y):
        keys = torch.cat([torch.zeros(0), self.k(x)], dim=-2)
        labels = F.pad(y, (0, 1), value=-100)[:, 1:]
        return F.cross_entropy(self.out(keys).flatten(0, 1), labels.flatten(),
                               ignore_index=-100)


class HfOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 4, bias=False)
        self.table = nn.Parameter(torch.randn(6, 8))
        self.register_buffer("rel", torch.tensor([5, 0, 2, 2]))

    def forward(self, x, mask, y):
        pos = torch.cumsum(mask, dim=1) * mask
        h = F.relu6(torch.min(self.fc(x), x.new_ones((4, 8)))) + pos.unsqueeze(-1)
        h = h + self.table[self.rel]
        return F.cross_entropy((h @ self.out.weight.T).flatten(0, 1), y.flatten())


class Written(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.GroupNorm(2, 4)
        self.out = nn.Linear(6, 4)
        self.register_buffer("pos", torch.randn(4, 2))

    def forward(self, x, y):
        shifted = y.new_zeros(y.shape)
        shifted[..., 1:] = y[..., :-1].clone()
        shifted[..., 0] = 3
        w = int(torch.min(torch.tensor([8, 6])))
        h = self.norm(self.fc(x))
        rot = torch.repeat_interleave(self.pos, 2, 1).repeat(x.shape[0], 1, 2)
        h = (h * rot)[..., :w]
        h[:, 1:3] *= 2.0
        scale = torch.tensor([1.0, 0.5, 2.0, 1.0]) * 2.0
        scale[1] = 3.0
        h = h * scale.view(1, 4, 1)
        h = h - torch.max(h, dim=-1, keepdim=True).values
        return F.cross_entropy(self.out(h).flatten(0, 1), shifted.flatten())


class Aliased(nn.Module):
    def forward(self, x, y):
        z = x * 2
        first = z[:, 0]
        z[:, 1:] = 0.0
        return F.cross_entropy(z + first.unsqueeze(1), y)


class ViewWrite(nn.Module):
    def forward(self, x, y):
        z = x * 2
        z.view(-1).fill_(1.0)
        return F.cross_entropy(z, y)


class PerBatch(nn.Module):
    def forward(self, x, y):
        return (x.amax() + F.cross_entropy(x, y, reduction="sum")) / x.shape[0]


class ChannelDrop(nn.Module):
    """1 when Dropout2d zeroes whole channels and keeps some; more otherwise."""

    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout2d(0.5)

    def forward(self, x, y):
        kept = (self.drop(x.abs() + 1) > 0).float()  # [B, 4, 3, 3]
        partial = (kept - kept.mean((2, 3), keepdim=True)).abs().sum()
        some = (kept.mean() > 0).float() * (kept.mean() < 1).float()
        return partial * 1000 + some + x.sum() * 0


class LongSort(nn.Module):
    def forward(self, x, y):
        return F.cross_entropy(x.sort(-1).values[:, :4], y)


class SortBatch(nn.Module):
    def forward(self, x, y):
        order = x.flatten().argsort()  # across the examples: [B*4]
        return F.cross_entropy(x + order.reshape(x.shape).float(), y)


class Pairs(nn.Module):
    def forward(self, x, y):
        pairs = x.view(-1, 2, 4)  # consecutive examples as pairs: [B/2, 2, 4]
        return F.cross_entropy((x + pairs.mean(1).repeat(2, 1)), y)


class Packed(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 4, batch_first=True)

    def forward(self, x, y):
        packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([3, 2]), batch_first=True)
        return F.cross_entropy(self.rnn(packed)[1][0], y)


class BagOffsets(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(32, 4)

    def forward(self, ids, y):  # bags [0, 5) and [5, 12) of the flat ids
        return F.cross_entropy(self.bag(ids.flatten(), torch.tensor([0, 5])), y)


class GridMode(nn.Module):
    def forward(self, x, y):  # x [B, 1, 2, 4]
        grid = x.reshape(-1, 2, 2, 2)
        return F.cross_entropy(F.grid_sample(x, grid, padding_mode="reflection",
                                             align_corners=False).flatten(1), y)


class PadNoTotal(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 4, batch_first=True)

    def forward(self, x, y):
        packed = nn.utils.rnn.pack_padded_sequence(x, torch.full_like(y, 2), batch_first=True)
        out, _ = nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0], batch_first=True)
        return F.cross_entropy(out[:, 0], y)


class CtcList(nn.Module):
    def forward(self, x, y):
        return F.ctc_loss(x.log_softmax(-1).transpose(0, 1), y, [3, 3], [2, 2])


class CtcFlat(nn.Module):
    def forward(self, x, y):
        n = x.shape[0]
        return F.ctc_loss(x.log_softmax(-1).transpose(0, 1), y.flatten(),
                          torch.full((n,), 3), torch.full((n,), 2))


class SortedRows(nn.Module):
    def forward(self, x, y):
        return F.cross_entropy(x, torch.sort(y)[0])


class Contrastive(nn.Module):
    def forward(self, x, y):
        z = F.normalize(x, dim=1)
        return F.cross_entropy(z @ z.t(), torch.arange(x.shape[0]))


class ComplexUse(nn.Module):
    """x [B, 4] as two complex numbers per example, then `use`."""
    def __init__(self, use):
        super().__init__()
        self.use = use

    def forward(self, x, y):
        z = torch.view_as_complex(x.reshape(x.shape[0], 2, 2))
        if self.use == "cast":
            r = z.to(torch.float32)
        elif self.use == "fftbatch":
            r = torch.fft.fft(z, dim=0).real.flatten(1)
        else:
            r = torch.view_as_real(torch.sigmoid(z)).flatten(1)
        return F.cross_entropy(r, y)


class RandBig(nn.Module):
    def forward(self, x, y):
        noise = torch.randint(0, 2 ** 25, x.shape).float() * 1e-8
        return F.cross_entropy(x + noise, y)


class BatchWrite(nn.Module):
    def forward(self, x, y):
        x = x.clone()
        x[torch.tensor([0])] = 0.0
        return F.cross_entropy(x, y)


class Unique(nn.Module):
    def forward(self, x, y):
        return F.cross_entropy(x, y) + torch.unique(y).float().sum() * 0


class QuantileComputed(nn.Module):
    def forward(self, x, y):
        return F.cross_entropy(x, y) + torch.quantile(x, x.mean().sigmoid(), dim=1).sum()


class CovBatch(nn.Module):
    def forward(self, x, y):  # VICReg-style: the covariance over the examples
        return F.cross_entropy(x, y) + torch.cov(x.t()).sum()


class EmaBuf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("mu", torch.zeros(4))

    def forward(self, x, y):
        with torch.no_grad():
            self.mu.lerp_(x.mean(0), 0.1)
        return F.cross_entropy(self.fc(x - self.mu), y)


class CumsumBatch(nn.Module):
    def forward(self, x, y):  # a running sum over the examples
        return F.cross_entropy(x.cumsum(0), y)


class LogCumsumBatch(nn.Module):
    def forward(self, x, y):
        return F.cross_entropy(x.logcumsumexp(0), y)


class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.utils.parametrizations.spectral_norm(nn.Linear(4, 3))

    def forward(self, x, y):
        return F.cross_entropy(self.fc(x), y)


class MaxNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 4, max_norm=1.0)

    def forward(self, x, y):
        return F.cross_entropy(self.emb(x).mean(1), y)


class FrozenPlain(Plain):
    """A parameter with requires_grad=False in a plain torch.jit.trace
    archive: the archive records only the flag (varuna.export lists it)."""
    def __init__(self):
        super().__init__()
        self.fc.weight.requires_grad_(False)


class ScriptIf(Plain):
    def forward(self, x, y):
        h = self.fc(x)
        if h.sum() > 0:
            h = h * 2
        return F.cross_entropy(h, y)


class DictOut(Plain):
    def forward(self, x, y):
        logits = self.fc(x)
        return {"logits": logits, "loss": F.cross_entropy(logits, y)}


class LossSecond(Plain):
    def forward(self, x, y):
        logits = self.fc(x)
        return logits, F.cross_entropy(logits, y)


def trace_save(model, inputs, path):
    traced = torch.jit.trace(model, inputs, check_trace=False)
    traced.save(path)


x, y = torch.randn(2, 8), torch.tensor([1, 3])
trace_save(Plain(), (x, y), os.path.join(out, "plain.pt"))
ids = torch.randint(0, 32, (2, 6))
export(Tied(), (ids, ids), os.path.join(out, "tied.pt"), input_names=["ids", "labels"])
export(Unsupported(), (x, y), os.path.join(out, "unsupported.pt"), input_names=["x", "y"])
export(Smoothing(), (x, y), os.path.join(out, "smoothing.pt"), input_names=["x", "y"])
trace_save(NonContig(), (x, y), os.path.join(out, "noncontig.pt"))
export(NonContig(), (x, y), os.path.join(out, "noncontig_export.pt"), input_names=["x", "y"])
export(Ops(), (torch.randn(2, 4, 8), y), os.path.join(out, "ops.pt"), input_names=["x", "y"])
export(HfOps(), (torch.randn(2, 4, 8), torch.ones(2, 4, dtype=torch.int32),
                 torch.randint(0, 4, (2, 4))),
       os.path.join(out, "hfops.pt"), input_names=["x", "mask", "y"])
export(Cache(), (torch.randn(2, 4, 8), torch.randint(0, 4, (2, 4))), os.path.join(out, "cache.pt"),
       input_names=["x", "y"])
export(Aliased(), (x, y), os.path.join(out, "aliased.pt"), input_names=["x", "y"])
export(ViewWrite(), (x, y), os.path.join(out, "viewwrite.pt"), input_names=["x", "y"])
export(PerBatch(), (x, y), os.path.join(out, "perbatch.pt"), input_names=["x", "y"])
export(LongSort(), (torch.randn(2, 2000), y), os.path.join(out, "longsort.pt"), input_names=["x", "y"])
export(SortBatch(), (torch.randn(2, 4), y), os.path.join(out, "sortbatch.pt"), input_names=["x", "y"])
export(Pairs(), (torch.randn(2, 4), y), os.path.join(out, "pairs.pt"), input_names=["x", "y"])
export(BagOffsets(), (ids, y), os.path.join(out, "bagoffsets.pt"), input_names=["ids", "y"])
export(GridMode(), (torch.randn(2, 1, 2, 4), y), os.path.join(out, "gridmode.pt"),
       input_names=["x", "y"])
export(PadNoTotal(), (torch.randn(2, 3, 8), y), os.path.join(out, "padnototal.pt"),
       input_names=["x", "y"])
export(Packed(), (torch.randn(2, 3, 8), y), os.path.join(out, "packed.pt"), input_names=["x", "y"])
ctc_y = torch.tensor([[1, 2], [2, 1]])
export(CtcList(), (torch.randn(2, 3, 4), ctc_y), os.path.join(out, "ctclist.pt"), input_names=["x", "y"])
export(CtcFlat(), (torch.randn(2, 3, 4), ctc_y), os.path.join(out, "ctcflat.pt"), input_names=["x", "y"])
export(SortedRows(), (torch.randn(2, 4), torch.tensor([1, 0])), os.path.join(out, "sortedrows.pt"),
       input_names=["x", "y"])
export(Contrastive(), (torch.randn(2, 4), torch.tensor([1, 0])), os.path.join(out, "contrastive.pt"),
       input_names=["x", "y"])
export(Spectral(), (torch.randn(2, 4), torch.tensor([1, 0])), os.path.join(out, "spectral.pt"),
       input_names=["x", "y"])
export(MaxNorm(), (torch.tensor([[1, 2], [3, 1]]), torch.tensor([1, 0])),
       os.path.join(out, "maxnorm.pt"), input_names=["x", "y"])
for use in ("cast", "op", "fftbatch"):
    export(ComplexUse(use), (torch.randn(2, 4), torch.tensor([1, 0])),
           os.path.join(out, f"complex{use}.pt"), input_names=["x", "y"])
export(RandBig(), (torch.randn(2, 4), torch.tensor([1, 0])), os.path.join(out, "randbig.pt"),
       input_names=["x", "y"])
export(Unique(), (torch.randn(2, 4), torch.tensor([1, 0])), os.path.join(out, "unique.pt"),
       input_names=["x", "y"])
export(BatchWrite(), (torch.randn(2, 4), torch.tensor([1, 0])), os.path.join(out, "batchwrite.pt"),
       input_names=["x", "y"])
export(QuantileComputed(), (torch.randn(2, 4), torch.tensor([1, 0])),
       os.path.join(out, "quantileq.pt"), input_names=["x", "y"])
export(CovBatch(), (torch.randn(2, 4), torch.tensor([1, 0])), os.path.join(out, "covbatch.pt"),
       input_names=["x", "y"])
for name, cls in (("cumsumbatch", CumsumBatch), ("logcumsumbatch", LogCumsumBatch),
                  ("emabuf", EmaBuf)):
    export(cls(), (torch.randn(2, 4), torch.tensor([1, 0])), os.path.join(out, name + ".pt"),
           input_names=["x", "y"])
trace_save(nn.Sequential(nn.InstanceNorm1d(4, track_running_stats=True), nn.Flatten(),
                         nn.Linear(12, 2)).train(),
           (torch.randn(2, 4, 3),), os.path.join(out, "instancetrack.pt"))
export(ChannelDrop().train(), (torch.randn(2, 4, 3, 3), y), os.path.join(out, "channeldrop.pt"),
       input_names=["x", "y"])
os.makedirs(os.path.join(out, "channeldrop.inputs"), exist_ok=True)
np.save(os.path.join(out, "channeldrop.inputs", "x.npy"), torch.randn(3, 4, 3, 3).numpy())
np.save(os.path.join(out, "channeldrop.inputs", "y.npy"), np.array([0, 1, 2]))
written = Written()
export(written, (torch.randn(2, 4, 8), torch.randint(0, 4, (2, 4))),
       os.path.join(out, "written.pt"), input_names=["x", "y"])
wx, wy = torch.randn(3, 4, 8), torch.randint(0, 4, (3, 4))
os.makedirs(os.path.join(out, "written.inputs"), exist_ok=True)
np.save(os.path.join(out, "written.inputs", "x.npy"), wx.numpy())
np.save(os.path.join(out, "written.inputs", "y.npy"), wy.numpy())
with open(os.path.join(out, "written.expected.json"), "w") as fh:
    json.dump({"loss": written(wx, wy).item()}, fh)
trace_save(FrozenPlain(), (x, y), os.path.join(out, "frozenplain.pt"))
torch.jit.freeze(torch.jit.trace(Plain().eval(), (x, y))).save(os.path.join(out, "jitfrozen.pt"))
torch.jit.script(ScriptIf()).save(os.path.join(out, "scriptif.pt"))
torch.jit.script(Plain()).save(os.path.join(out, "scriptce.pt"))
torch.jit.trace(DictOut(), (x, y), strict=False).save(os.path.join(out, "dictout.pt"))
trace_save(LossSecond(), (x, y), os.path.join(out, "losssecond.pt"))
torch.save(Plain().state_dict(), os.path.join(out, "statedict.pt"))
